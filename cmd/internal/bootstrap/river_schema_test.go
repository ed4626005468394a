package bootstrap

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
)

func TestCheckRiverSchema(t *testing.T) {
	t.Parallel()

	// setup returns a migrated database's URL and a pool on it.
	setup := func(t *testing.T) (string, *pgxpool.Pool) {
		t.Helper()
		url := dbtest.NewDB(t)
		pool, err := pgxpool.New(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return url, pool
	}
	// wantFixedByMigrateUp checks that the remedy the error names works: after migrations.Up,
	// which `migrate up` runs, the check passes.
	wantFixedByMigrateUp := func(t *testing.T, url string, pool *pgxpool.Pool) {
		t.Helper()
		if err := migrations.Up(t.Context(), url); err != nil {
			t.Fatal(err)
		}
		if err := CheckRiverSchema(t.Context(), pool); err != nil {
			t.Fatalf("want River's schema complete after migrate up, got %v", err)
		}
	}

	t.Run("PassesOnAMigratedDatabase", func(t *testing.T) {
		t.Parallel()
		_, pool := setup(t)
		if err := CheckRiverSchema(t.Context(), pool); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("FailsWhenRiverIsBehind", func(t *testing.T) {
		t.Parallel()
		url, pool := setup(t)
		version := dbtest.RiverBehind(t, url)
		err := CheckRiverSchema(t.Context(), pool)
		for _, want := range []string{"River schema is behind", fmt.Sprintf("migration %d of %d", version-1, version),
			fmt.Sprintf("[%d]", version), "go run ./cmd/migrate up"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("want an error saying %q, got %v", want, err)
			}
		}
		wantFixedByMigrateUp(t, url, pool)
	})

	t.Run("FailsWhenRiverIsMissing", func(t *testing.T) {
		t.Parallel()
		url, pool := setup(t)
		dbtest.RiverRemoved(t, url)
		err := CheckRiverSchema(t.Context(), pool)
		if err == nil || !strings.Contains(err.Error(), "has no River schema") || !strings.Contains(err.Error(), "go run ./cmd/migrate up") {
			t.Fatalf("want River's schema reported missing, with the command to run; got %v", err)
		}
		wantFixedByMigrateUp(t, url, pool)
	})
}
