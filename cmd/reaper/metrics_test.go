package main

import (
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// TestMetrics runs the reaper with METRICS_ADDR on two old keys, one finished and one not, and
// scrapes what it reaped.
func TestMetrics(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "reaper")
	b := ridetest.Setup(t)
	oldKeys(t, b)

	p := proctest.Start(t, bin, []string{"DATABASE_URL=" + b.Pool.Config().ConnString(), "METRICS_ADDR=127.0.0.1:0"})
	proctest.WaitMetrics(t, p, proctest.MetricsURL(t, p), map[string]float64{
		`rocketrides_reaper_keys_total{result="finished"}`:  1,
		`rocketrides_reaper_keys_total{result="abandoned"}`: 1,
	}, 30*time.Second)
	if n := b.Count(t, `SELECT count(*) FROM abandoned_requests`); n != 1 {
		t.Errorf("want the unfinished key recorded, got %d records", n)
	}
}
