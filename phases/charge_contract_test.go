package phases

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/stripemock"
	"github.com/rocketrides/rocketrides/models"
)

// TestChargeRequestContract sends the charge request this package really makes, through
// stripe-go, to stripe-mock, which checks it against Stripe's own OpenAPI specification: a
// renamed or mistyped parameter fails here even though our stand-in might accept it.
func TestChargeRequestContract(t *testing.T) {
	t.Parallel()

	sc := stripeclient.New(stripeclient.Config{APIKey: "sk_test_123", URL: stripemock.Start(t), Timeout: 10 * time.Second})
	executor := New(nil, sc, slog.New(slog.DiscardHandler), Config{})

	key := &models.IdempotencyKey{ID: 1, IdempotencyKey: "contract-0123456789abcdef",
		StripeIdempotencyKey: StripeIdempotencyKey([]byte("secret"), 1, "contract-0123456789abcdef")}
	user := &models.User{ID: 1, StripeCustomerID: "cus_123"}

	charge, err := executor.stripe.Charges.New(chargeParams(context.Background(), key, user))
	if err != nil {
		t.Fatalf("stripe-mock rejected our charge request: %s", err)
	}
	if charge.ID == "" || charge.LastResponse == nil || charge.LastResponse.StatusCode != 200 {
		t.Fatalf("want a charge back, got %+v", charge)
	}
	if got := charge.LastResponse.IdempotencyKey; got != key.StripeIdempotencyKey {
		t.Fatalf("want the request sent with the key's Stripe idempotency key %q, stripe-mock saw %q", key.StripeIdempotencyKey, got)
	}
}
