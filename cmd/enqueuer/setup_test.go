package main

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

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
		INSERT INTO staged_jobs (job_name, job_args, user_id)
		SELECT 'send_ride_receipt', jsonb_build_object('ride_id', i::text, 'user_id', 1, 'amount', 2000, 'currency', 'usd'), 1
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
