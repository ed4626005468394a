package main

import (
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestRefusesToStartWithoutRiversSchema: a worker whose River does not find the schema it
// needs exits at once, before it works a job, and says what to run.
func TestRefusesToStartWithoutRiversSchema(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	// A newer River than the one that migrated the database: goose has nothing pending.
	t.Run("RiverBehind", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		dbtest.RiverBehind(t, w.url)
		_, stderr, code := proctest.Run(t, bin, []string{"DATABASE_URL=" + w.url}, "-once")
		if code == 0 || !strings.Contains(stderr, "River schema is behind") || !strings.Contains(stderr, "go run ./cmd/migrate up") {
			t.Fatalf("want a non-zero exit naming River's schema and the command to run, got %d:\n%s", code, stderr)
		}
		if state := w.jobState(t); state != "available" {
			t.Fatalf("want the job left alone, got %s", state)
		}
	})

	t.Run("NothingMigrated", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := proctest.Run(t, bin, []string{"DATABASE_URL=" + dbtest.NewEmptyDB(t)}, "-once")
		if code == 0 || !strings.Contains(stderr, "00002_river_schema.go") || !strings.Contains(stderr, "go run ./cmd/migrate up") {
			t.Fatalf("want a non-zero exit naming River's migration and the command to run, got %d:\n%s", code, stderr)
		}
	})
}

// A poll more frequent than the worker's fetches could be is a mistake, said before anything
// starts.
func TestRefusesAPollShorterThanItsFetchCooldown(t *testing.T) {
	t.Parallel()
	_, stderr, code := proctest.Run(t, proctest.Build(t, "worker"), []string{"DATABASE_URL=postgres://unused", "WORKER_POLL_INTERVAL=10ms"}, "-once")
	if code == 0 || !strings.Contains(stderr, "WORKER_POLL_INTERVAL must be at least 25ms") {
		t.Fatalf("want a non-zero exit naming WORKER_POLL_INTERVAL and its minimum, got %d:\n%s", code, stderr)
	}
}
