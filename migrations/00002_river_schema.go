package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSchemaVersion is the goose version that installs River's tables (river_job and the
// rest), which the workers, the enqueuer and the completer need.
const riverSchemaVersion = 2

// riverSchemaMigration installs River's schema with River's own migrator rather than a copy of
// its SQL, so that the schema is always the one the linked River expects, and River keeps its
// own record (river_migration) of what it applied.
//
// Up brings River to the newest schema the linked River knows. Once version 2 is applied, goose
// will not run it again: the migrations of a later River are applied by RiverUp, which Up and
// `migrate up` run after goose's.
//
// Down removes River's tables entirely, river_migration included.
//
// Both run outside goose's transaction (RunDB): River's migrator commits each of its versions
// by itself, because some of them cannot share a transaction with the next.
func riverSchemaMigration() *goose.Migration {
	m := goose.NewGoMigration(riverSchemaVersion,
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			_, err := migrateRiver(ctx, db, rivermigrate.DirectionUp, nil)
			return err
		}},
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			_, err := migrateRiver(ctx, db, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
			return err
		}},
	)
	m.Source = "00002_river_schema.go" // For status and results; goose leaves it empty.
	return m
}

func migrateRiver(ctx context.Context, db *sql.DB, direction rivermigrate.Direction, opts *rivermigrate.MigrateOpts) (*rivermigrate.MigrateResult, error) {
	pool, err := riverPool(ctx, db)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{
		Logger: slog.New(slog.DiscardHandler), // Its default logs to stdout.
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, direction, opts)
	if err != nil {
		return nil, fmt.Errorf("error migrating River's schema %s: %w", direction, err)
	}
	return res, nil
}

// riverPool opens a one-connection pgx pool with the settings of db's connections. River's
// migrator needs a pool to run each version in a transaction of its own; River's database/sql
// driver (riverdatabasesql), which would take db as it is, is not among this module's
// dependencies, whereas riverpgxv5 is, for the workers.
func riverPool(ctx context.Context, db *sql.DB) (*pgxpool.Pool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("error connecting to database: %w", err)
	}
	defer conn.Close()

	poolConfig, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("error creating pool configuration: %w", err)
	}
	err = conn.Raw(func(driverConn any) error {
		pgxConn, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the River migration needs the pgx database/sql driver (migrations.Open), not %T", driverConn)
		}
		poolConfig.ConnConfig = pgxConn.Conn().Config().Copy()
		return nil
	})
	if err != nil {
		return nil, err
	}
	// River's migrator uses one connection at a time.
	poolConfig.MaxConns = 1

	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, fmt.Errorf("error opening pool for River: %w", err)
	}
	return pool, nil
}
