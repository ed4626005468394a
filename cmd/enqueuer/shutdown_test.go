package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestRunsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	bin, env, pool := setup(t)
	// Only a notification can wake it within the test.
	p := proctest.Start(t, bin, append(env, "ENQUEUER_POLL_INTERVAL=1h"))
	proctest.WaitOutput(t, p, "Enqueuer: started", 30*time.Second)

	stage(t, pool, 1)
	deadline := time.Now().Add(30 * time.Second)
	for countRiverJobs(t, pool) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the staged job did not reach River:\n%s", p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}

	p.Terminate(t, 10*time.Second)
	if !strings.Contains(p.Output(), "Enqueuer: stopped") {
		t.Errorf("want a clean stop logged, got:\n%s", p.Output())
	}
	// Nothing of the process is left connected, its listening connection included. A server
	// process ends a moment after its client says goodbye, hence the wait.
	deadline = time.Now().Add(10 * time.Second)
	for {
		var n int
		err := pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want no other connections after exit, got %d", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
