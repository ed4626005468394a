package migrations_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
)

// wantTables are tables the application relies on: the article's, and River's job table.
var wantTables = []string{
	"abandoned_requests", "audit_records", "idempotency_keys", "rides", "staged_jobs", "users",
	"river_job",
}

func TestUp(t *testing.T) {
	t.Parallel()

	t.Run("CreatesTables", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewEmptyDB(t)
		if err := migrations.Up(t.Context(), url); err != nil {
			t.Fatalf("error migrating: %v", err)
		}
		assertTables(t, url, wantTables, nil)
	})

	t.Run("TwiceIsNoOp", func(t *testing.T) {
		t.Parallel()
		_, provider := migrated(t)
		results, err := provider.Up(t.Context())
		if err != nil {
			t.Fatalf("error migrating again: %v", err)
		}
		if len(results) != 0 {
			t.Errorf("second up applied %d migrations, want none", len(results))
		}
	})

	t.Run("ConcurrentCallsBothSucceed", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewEmptyDB(t)
		errs := make(chan error)
		for range 2 {
			go func() { errs <- migrations.Up(t.Context(), url) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("error migrating concurrently: %v", err)
			}
		}
		assertTables(t, url, wantTables, nil)
	})
}

func TestDownAllTheWayThenUpAgain(t *testing.T) {
	t.Parallel()

	url, provider := migrated(t)
	ctx := t.Context()
	if _, err := provider.DownTo(ctx, 0); err != nil {
		t.Fatalf("error migrating down: %v", err)
	}
	// River's own bookkeeping goes too, or a later up would believe River's tables exist.
	assertTables(t, url, nil, append(slices.Clone(wantTables), "river_migration"))

	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("error migrating up again: %v", err)
	}
	assertTables(t, url, wantTables, nil)
}

func TestDownRollsBackOneVersion(t *testing.T) {
	t.Parallel()

	_, provider := migrated(t)
	ctx := t.Context()
	_, latest, err := provider.GetVersions(ctx)
	if err != nil {
		t.Fatalf("error getting versions: %v", err)
	}

	result, err := provider.Down(ctx)
	if err != nil {
		t.Fatalf("error migrating down: %v", err)
	}
	if result.Source.Version != latest {
		t.Errorf("down rolled back version %d, want the latest, %d", result.Source.Version, latest)
	}
}

func TestNewProviderListsRiverSchema(t *testing.T) {
	t.Parallel()

	db, err := migrations.Open("postgres://nobody@localhost/nothing")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatalf("error creating provider: %v", err)
	}
	sources := provider.ListSources()
	i := slices.IndexFunc(sources, func(s *goose.Source) bool { return s.Version == 2 })
	if i < 0 {
		t.Fatal("no migration version 2")
	}
	if got := sources[i]; got.Type != goose.TypeGo || got.Path != "00002_river_schema.go" {
		t.Errorf("version 2 is %s %q, want the Go migration 00002_river_schema.go", got.Type, got.Path)
	}
}

// migrated returns the URL of a fresh database migrated all the way up, and a provider on it.
func migrated(t *testing.T) (string, *goose.Provider) {
	t.Helper()
	url := dbtest.NewEmptyDB(t)
	db, err := migrations.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	provider, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatalf("error creating provider: %v", err)
	}
	if _, err := provider.Up(t.Context()); err != nil {
		t.Fatalf("error migrating up: %v", err)
	}
	return url, provider
}

// assertTables checks that the public schema of the database at url holds every table in
// present and none in absent.
func assertTables(t *testing.T, url string, present, absent []string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("error connecting: %v", err)
	}
	defer conn.Close(context.Background())

	rows, _ := conn.Query(t.Context(), "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("error listing tables: %v", err)
	}
	for _, table := range present {
		if !slices.Contains(tables, table) {
			t.Errorf("table %s missing; tables: %v", table, tables)
		}
	}
	for _, table := range absent {
		if slices.Contains(tables, table) {
			t.Errorf("table %s still there; tables: %v", table, tables)
		}
	}
}

// TestOpenTakesPoolSettings: DATABASE_URL may carry pgxpool's settings, such as pool_max_conns,
// and migrating with it works: they are pgx's, not Postgres's.
func TestOpenTakesPoolSettings(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDB(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	if err := migrations.Up(t.Context(), url+sep+"pool_max_conns=8"); err != nil {
		t.Fatalf("error migrating with pool_max_conns in the URL: %v", err)
	}
}
