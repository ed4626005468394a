package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverUp applies the River migrations that the linked River knows and the database lacks, and
// returns their versions (none, usually). Goose's migration 2 installs River's schema once, and
// goose never runs it again; a newer River brings migrations of its own, and without this step
// nothing would apply them. Up calls it after the goose migrations, and so does `migrate up`,
// the command that every process's failed schema check (bootstrap.CheckRiverSchema) points to.
//
// It holds goose's advisory lock (NewProvider's) while it works, so that it takes turns with
// other processes migrating the same database, goose's migrations or River's.
func RiverUp(ctx context.Context, db *sql.DB) (versions []int, err error) {
	err = withMigrationLock(ctx, db, func() error {
		res, err := migrateRiver(ctx, db, rivermigrate.DirectionUp, nil)
		if err != nil {
			return err
		}
		for _, v := range res.Versions {
			versions = append(versions, v.Version)
		}
		return nil
	})
	return versions, err
}

// withMigrationLock runs fn holding goose's advisory lock (NewProvider's), so that fn takes turns
// with every other process migrating the same database.
func withMigrationLock(ctx context.Context, db *sql.DB, fn func() error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("error connecting to database: %w", err)
	}
	defer conn.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(lockPollIntervalSeconds, lockPollAttempts))
	if err != nil {
		return fmt.Errorf("error creating migration lock: %w", err)
	}
	if err := locker.SessionLock(ctx, conn); err != nil {
		return fmt.Errorf("error taking migration lock: %w", err)
	}
	defer func() {
		if unlockErr := locker.SessionUnlock(context.WithoutCancel(ctx), conn); unlockErr != nil {
			err = errors.Join(err, fmt.Errorf("error releasing migration lock: %w", unlockErr))
		}
	}()
	return fn()
}
