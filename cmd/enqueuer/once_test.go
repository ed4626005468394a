package main

import (
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// A job staged by a newer release, of a name this enqueuer's workers do not know, stays staged
// for the newer enqueuer, and is reported.
func TestOnceLeavesUnknownJobNamesStaged(t *testing.T) {
	t.Parallel()
	bin, env, pool := setup(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO staged_jobs (job_name, job_args, user_id) VALUES ('send_ride_invoice', '{"ride_id": 1}', 1)`); err != nil {
		t.Fatal(err)
	}
	stage(t, pool, 1)

	stdout, stderr, code := proctest.Run(t, bin, env, "-once")
	if code != 0 || stdout != `{"enqueued":1,"failed":0}`+"\n" {
		t.Fatalf("want the receipt enqueued and nothing failed, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "job names this release does not know") || !strings.Contains(stderr, "num_unknown=1") {
		t.Errorf("want a warning counting the unknown job, got:\n%s", stderr)
	}
	var name string
	var failed bool
	if err := pool.QueryRow(t.Context(), `SELECT job_name, failed_at IS NOT NULL FROM staged_jobs`).Scan(&name, &failed); err != nil {
		t.Fatalf("want the unknown job still staged: %v", err)
	}
	if name != "send_ride_invoice" || failed {
		t.Errorf("want the unknown job untouched, got %s (failed %t)", name, failed)
	}
}
