package completer

import (
	"context"
	"log/slog"
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/models"
)

func TestMetrics(t *testing.T) {
	t.Parallel()

	t.Run("CountsKeysByResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := metrics.NewCompleter(nil)
		c := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{Metrics: m})
		b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
		b.abandon(t, b.Rider, models.RecoveryPointRideCreated)

		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		b.runOnce(t, c, Result{Succeeded: 1, Failed: 1})
		b.runOnce(t, c, Result{}) // the failed key is left alone until idle again
		for result, want := range map[string]float64{metrics.CompleterSucceeded: 1, metrics.CompleterFailed: 1} {
			if got := testutil.ToFloat64(m.Keys.WithLabelValues(result)); got != want {
				t.Errorf("rocketrides_completer_keys_total{result=%q} = %v, want %v", result, got, want)
			}
		}
	})

	t.Run("RequestsAwaitingReview", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := map[string]int64{}
		for _, reason := range models.AbandonedReasons {
			want[reason] = 0
		}
		requireCounts := func() {
			t.Helper()
			got, err := b.completer.RequestsAwaitingReview(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("want %v, got %v", want, got)
			}
		}
		requireCounts() // every reason, at 0

		for _, reason := range []string{models.AbandonedReasonReapedUnfinished, models.AbandonedReasonReapedUnfinished,
			models.AbandonedReasonStripeReplayedError, "a_reason_of_another_release"} {
			b.Exec(t, `INSERT INTO abandoned_requests (reason, idempotency_key, user_id, request_params,
				recovery_point, key_created_at, key_last_run_at)
				VALUES ($1, 'completer-test-key-abandoned', $2, '{}', 'ride_created', now(), now())`, reason, b.Rider.ID)
			want[reason]++
		}
		requireCounts()
	})
}
