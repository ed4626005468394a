package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// CheckRiverSchema fails unless River's schema on pool has every migration of the linked River.
// Every process that works with River calls it at start, after OpenPool: a River client on a
// schema it does not know fails later, on some job, in a less obvious way (a missing column in
// the middle of a fetch), or worse, works half right.
//
// It is apart from OpenPool's check of the goose migrations because River's schema can lag
// behind on its own. Goose's migration 2 installs River once; a newer River brings migrations of
// its own, which `migrate up` applies (migrations.RiverUp) but goose does not count as pending.
//
// Like OpenPool, it waits up to connectWait for a database that cannot answer yet, which is
// what a database restarting just after OpenPool looks like.
func CheckRiverSchema(ctx context.Context, pool *pgxpool.Pool) error {
	return waitForDatabase(ctx, slog.New(slog.DiscardHandler), func(ctx context.Context) error {
		return checkRiverSchema(ctx, pool)
	})
}

func checkRiverSchema(ctx context.Context, pool *pgxpool.Pool) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{
		Logger: slog.New(slog.DiscardHandler), // It logs a failed validation at info; the error says it.
	})
	if err != nil {
		return fmt.Errorf("error creating River migrator: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("error checking River's schema: %w", err)
	}
	if res.OK {
		return nil
	}

	const fix = "run `go run ./cmd/migrate up` with the same DATABASE_URL"
	existing, err := migrator.ExistingVersions(ctx)
	if err != nil {
		return fmt.Errorf("error checking River's schema: %w", err)
	}
	if len(existing) == 0 {
		return &schemaError{"database has no River schema: " + fix}
	}
	latest := migrator.AllVersions()
	return &schemaError{fmt.Sprintf("database's River schema is behind this build's River (at River migration %d of %d; %s): %s",
		existing[len(existing)-1].Version, latest[len(latest)-1].Version, strings.Join(res.Messages, "; "), fix)}
}
