package main

import (
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// An enqueuer on a database without River's schema exits at once, saying what to run, and leaves
// the staged jobs staged.
func TestRefusesToStartWithoutRiversSchema(t *testing.T) {
	t.Parallel()
	bin, env, pool := setup(t)
	stage(t, pool, 1)
	dbtest.RiverRemoved(t, strings.TrimPrefix(env[0], "DATABASE_URL="))

	_, stderr, code := proctest.Run(t, bin, env, "-once")
	if code == 0 || !strings.Contains(stderr, "has no River schema") || !strings.Contains(stderr, "go run ./cmd/migrate up") {
		t.Fatalf("want a non-zero exit naming River's schema and the command to run, got %d:\n%s", code, stderr)
	}
	var staged int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM staged_jobs WHERE failed_at IS NULL`).Scan(&staged); err != nil {
		t.Fatal(err)
	}
	if staged != 1 {
		t.Fatalf("want the staged job left staged, got %d", staged)
	}
}

func TestBadFlag(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "enqueuer")
	if _, stderr, code := proctest.Run(t, bin, nil, "-sideways"); code == 0 || !strings.Contains(stderr, "-once") {
		t.Fatalf("want usage and a non-zero exit, got %d: %s", code, stderr)
	}
}
