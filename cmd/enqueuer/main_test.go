package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup builds the enqueuer and returns it with a database, its environment, and a pool on it.
func setup(t *testing.T) (string, []string, *pgxpool.Pool) {
	t.Helper()
	bin := proctest.Build(t, "enqueuer")
	url := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return bin, []string{"DATABASE_URL=" + url}, pool
}

func stage(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
		INSERT INTO staged_jobs (job_name, job_args)
		SELECT 'send_ride_receipt', jsonb_build_object('ride_id', i::text, 'user_id', 1, 'amount', 2000, 'currency', 'usd')
		FROM generate_series(1, $1) AS i`, n)
	if err != nil {
		t.Fatalf("error staging jobs: %s", err)
	}
}

func countRiverJobs(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOnce(t *testing.T) {
	t.Parallel()
	bin, env, pool := setup(t)
	stage(t, pool, 2)

	for _, want := range []string{`{"enqueued":2,"failed":0}`, `{"enqueued":0,"failed":0}`} {
		stdout, stderr, code := proctest.Run(t, bin, env, "-once")
		if code != 0 {
			t.Fatalf("enqueuer -once exited %d: %s", code, stderr)
		}
		if stdout != want+"\n" {
			t.Fatalf("want exactly the line %s on stdout, got %q", want, stdout)
		}
	}
	if n := countRiverJobs(t, pool); n != 2 {
		t.Errorf("want 2 River jobs, got %d", n)
	}
}

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

// A job staged by a newer release, of a name this enqueuer's workers do not know, stays staged
// for the newer enqueuer, and is reported.
func TestOnceLeavesUnknownJobNamesStaged(t *testing.T) {
	t.Parallel()
	bin, env, pool := setup(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO staged_jobs (job_name, job_args) VALUES ('send_ride_invoice', '{"ride_id": 1}')`); err != nil {
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

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 on SIGTERM, got %d:\n%s", code, p.Output())
	}
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

func TestBadFlag(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "enqueuer")
	if _, stderr, code := proctest.Run(t, bin, nil, "-sideways"); code == 0 || !strings.Contains(stderr, "-once") {
		t.Fatalf("want usage and a non-zero exit, got %d: %s", code, stderr)
	}
}
