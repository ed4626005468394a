// Package migrations holds the schema of Rocket Rides as goose migrations, embedded in the
// binary so that every process, test and command applies exactly the same ones.
//
// Versions are the numeric prefixes of the files: 00001_create_core_tables.sql, River's schema
// as Go migration 2 (00002_river_schema.go), and any later NNNNN_name.sql dropped in this
// directory, which is picked up without further registration.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var sqlMigrations embed.FS

// Lock polling: goose polls for its advisory lock every 5 s by default, which a test binary
// whose parallel setups migrate at once would mostly spend waiting. Once a second, for up to
// five minutes, suits a migration that takes well under a second.
const (
	lockPollIntervalSeconds = 1
	lockPollAttempts        = 300
)

// NewProvider returns a goose provider for the project's migrations on db, which must use the
// pgx driver (see Open) because River's migration talks to Postgres through pgx. Two processes
// migrating the same database at once take turns, through a Postgres advisory lock held for the
// whole run. The provider logs nothing: callers report its results as they see fit.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(lockPollIntervalSeconds, lockPollAttempts))
	if err != nil {
		return nil, fmt.Errorf("error creating migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, sqlMigrations,
		goose.WithSessionLocker(locker),
		goose.WithGoMigrations(riverSchemaMigration()),
		// Only the migrations of this package, whatever else the binary registers globally.
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		return nil, fmt.Errorf("error creating migration provider: %w", err)
	}
	return provider, nil
}

// Open opens databaseURL through pgx's database/sql driver, the one NewProvider needs.
func Open(databaseURL string) (*sql.DB, error) {
	// Parsed as a pool's URL, so that the pool settings pgxpool reads from it (pool_max_conns
	// and the like) are taken off rather than sent to Postgres, which would refuse them.
	config, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing database URL: %w", err)
	}
	// Every statement of every migration waits LockTimeout at most for a lock (see
	// RetryLockTimeouts), and its session is known by its name.
	config.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprintf("%dms", LockTimeout.Milliseconds())
	config.ConnConfig.RuntimeParams["application_name"] = ApplicationName
	return stdlib.OpenDB(*config.ConnConfig), nil
}

// Up applies every pending migration to the database at databaseURL, goose's and then River's
// (RiverUp), and on a Citus coordinator lays the tables out (CitusUp). It is safe to call from
// several processes at once: they take turns, and all but the first find nothing to do. A step
// that times out on a lock is tried again (RetryLockTimeouts).
func Up(ctx context.Context, databaseURL string) (err error) {
	db, err := Open(databaseURL)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()

	provider, err := NewProvider(db)
	if err != nil {
		return err
	}
	err = RetryLockTimeouts(ctx, db, func(ctx context.Context) error {
		_, err := provider.Up(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("error migrating database: %w", err)
	}
	err = RetryLockTimeouts(ctx, db, func(ctx context.Context) error {
		_, err := RiverUp(ctx, db)
		return err
	})
	if err != nil {
		return fmt.Errorf("error migrating database: %w", err)
	}
	err = RetryLockTimeouts(ctx, db, func(ctx context.Context) error {
		_, err := CitusUp(ctx, db)
		return err
	})
	if err != nil {
		return fmt.Errorf("error laying the database out for Citus: %w", err)
	}
	return nil
}
