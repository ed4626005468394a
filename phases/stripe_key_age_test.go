package phases

import (
	"context"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/models"
)

// TestStripeKeyAgeCountsFromTheFirstAttempt retries a key's Stripe call twice across the age
// of Stripe's idempotency key: the first attempt, a retry 12 hours later, and one 11 hours after
// that, each of the first two unanswered. The third is past StripeKeyMaxAge counted from the
// first attempt, so it goes to review and sends nothing: a key whose age counted from its latest
// attempt would be sent again after Stripe forgot it, and a key retried at least once a day would
// never go to review.
func TestStripeKeyAgeCountsFromTheFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// age moves the key's attempts back by interval, as if that much time had passed since.
	age := func(b *testBundle, key, interval string) {
		b.Exec(t, `UPDATE idempotency_keys SET charge_attempted_at = charge_attempted_at - $2::interval
			WHERE idempotency_key = $1`, key, interval)
	}
	requireForReview := func(t *testing.T, b *testBundle, key string) {
		t.Helper()
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests a JOIN idempotency_keys k ON k.id = a.idempotency_key_id
			WHERE k.idempotency_key = $1 AND a.reason = $2 AND k.recovery_point = 'finished'`,
			key, models.AbandonedReasonStripeKeyExpired); n != 1 {
			t.Fatalf("want the key finished and set aside for review as %s, got %d such rows", models.AbandonedReasonStripeKeyExpired, n)
		}
	}

	for _, kind := range stripeCallKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			send := kind.start(t, b)
			kind.inject(b.Stripe.Server, fakestripe.FaultError500, 2)
			for _, wait := range []string{"12 hours", "11 hours 1 minute"} {
				if _, err := send(ctx, b.executor); err == nil {
					t.Fatalf("want the unanswered %s to fail the attempt", kind.name)
				}
				age(b, kind.key, wait)
			}
			requests := 0
			if kind.requests != nil {
				requests = kind.requests(b)
			}
			if _, err := send(ctx, b.executor); err != nil {
				t.Fatal(err)
			}
			if kind.requests != nil && kind.requests(b) != requests {
				t.Fatalf("want nothing sent 23 hours after the first attempt, got %d more requests", kind.requests(b)-requests)
			}
			if n := kind.made(b); n != 0 {
				t.Fatalf("want no %s made 23 hours after the first attempt, got %d", kind.name, n)
			}
			requireForReview(t, b, kind.key)
		})
	}
}
