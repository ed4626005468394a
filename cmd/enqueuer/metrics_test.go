package main

import (
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestMetrics runs the enqueuer with METRICS_ADDR on staged jobs of three kinds (two receipts it
// enqueues, one whose arguments no worker takes, which it sets aside, and an hour-old job of a
// name this release does not know, which waits) and scrapes what it counted and what staged_jobs
// holds.
func TestMetrics(t *testing.T) {
	t.Parallel()
	bin, env, pool := setup(t)
	stage(t, pool, 2)
	if _, err := pool.Exec(t.Context(), `
		INSERT INTO staged_jobs (created_at, job_name, job_args, user_id) VALUES
			(now(), 'send_ride_receipt', '{"ride_id": "3", "user_id": 1, "amount": 0, "currency": "usd"}', 1),
			(now() - interval '1 hour', 'send_ride_invoice', '{"ride_id": 1}', 1)`); err != nil {
		t.Fatal(err)
	}

	p := proctest.Start(t, bin, append(env, "METRICS_ADDR=127.0.0.1:0"))
	text := proctest.WaitMetrics(t, p, proctest.MetricsURL(t, p), map[string]float64{
		"rocketrides_enqueued_jobs_total":         2,
		"rocketrides_staged_jobs_set_aside_total": 1,
		"rocketrides_staged_jobs":                 1,
		"rocketrides_staged_jobs_failed":          1,
	}, 30*time.Second)
	if age, ok := proctest.MetricValue(text, "rocketrides_staged_job_oldest_age_seconds"); !ok || age < 3600 || age > 3600+60 {
		t.Errorf("rocketrides_staged_job_oldest_age_seconds = %v (present %t), want the hour the unknown job has waited", age, ok)
	}
	if n := countRiverJobs(t, pool); n != 2 {
		t.Errorf("want 2 River jobs, got %d", n)
	}
}
