package reaper

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/internal/metrics"
)

func TestMetrics(t *testing.T) {
	t.Parallel()

	t.Run("CountsFinishedAndAbandonedKeysApart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := metrics.NewReaper(nil)
		r := New(b.Pool, slog.New(slog.DiscardHandler), Config{Metrics: m})
		requireCounts := func(finished, abandoned float64) {
			t.Helper()
			for result, want := range map[string]float64{metrics.ReaperFinished: finished, metrics.ReaperAbandoned: abandoned} {
				if got := testutil.ToFloat64(m.Keys.WithLabelValues(result)); got != want {
					t.Errorf("rocketrides_reaper_keys_total{result=%q} = %v, want %v", result, got, want)
				}
			}
		}

		b.request(t, b.Rider, false, "73 hours")
		b.request(t, b.Rider, false, "73 hours")
		b.request(t, b.Rider, true, "73 hours")
		b.request(t, b.Rider, false, "1 hour")
		b.runOnce(t, r, Result{Reaped: 3, Abandoned: 1})
		requireCounts(2, 1)

		// A pass that rolls back counts nothing.
		b.insertKeys(t, b.Rider, 2, "73 hours")
		b.Exec(t, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'abandoned_requests refuses inserts'; END $$`)
		b.Exec(t, `CREATE TRIGGER refuse BEFORE INSERT ON abandoned_requests FOR EACH ROW EXECUTE FUNCTION refuse()`)
		if _, err := r.RunOnce(context.Background()); err == nil {
			t.Fatal("want the pass failed")
		}
		requireCounts(2, 1)
	})
}
