package dbtest

import (
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverBehind rolls River's schema in the database at url back by one River migration, as on a
// database migrated by an older build before River was upgraded, and returns the version it
// rolled back. Goose still sees every migration applied.
func RiverBehind(t testing.TB, url string) int {
	t.Helper()
	// Down with no options rolls back the newest applied version alone.
	versions := migrateRiverDown(t, url, nil)
	if len(versions) != 1 {
		t.Fatalf("dbtest: want one River migration rolled back, got %v", versions)
	}
	return versions[0]
}

// RiverRemoved removes River's schema from the database at url entirely, river_migration
// included, while goose still sees every migration applied.
func RiverRemoved(t testing.TB, url string) {
	t.Helper()
	migrateRiverDown(t, url, &rivermigrate.MigrateOpts{TargetVersion: -1})
}

func migrateRiverDown(t testing.TB, url string, opts *rivermigrate.MigrateOpts) []int {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatalf("dbtest: error opening pool: %v", err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("dbtest: error creating River migrator: %v", err)
	}
	res, err := migrator.Migrate(t.Context(), rivermigrate.DirectionDown, opts)
	if err != nil {
		t.Fatalf("dbtest: error migrating River down: %v", err)
	}
	versions := make([]int, len(res.Versions))
	for i, v := range res.Versions {
		versions[i] = v.Version
	}
	return versions
}
