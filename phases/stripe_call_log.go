package phases

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stripe/stripe-go/v76"
)

// The outcomes of a charge sent to Stripe, as its log line names them.
const (
	chargeOutcomeCharged     = "charged"      // Stripe charged (or replayed a charge)
	chargeOutcomeRefused     = "refused"      // declined, or rejected for good: the request ends with a 402
	chargeOutcomeNeedsReview = "needs_review" // no retry can settle it: recorded for a person
	chargeOutcomeUnavailable = "unavailable"  // no definitive answer: a retry asks again
	chargeOutcomeError       = "error"        // anything else, our bug
)

// chargeOutcome names what sortChargeAnswer made of a charge.
func chargeOutcome(answer *chargeAnswer, err error) string {
	var unavailable *PaymentUnavailableError
	switch {
	case errors.As(err, &unavailable):
		return chargeOutcomeUnavailable
	case err != nil:
		return chargeOutcomeError
	case answer.refusal != nil:
		return chargeOutcomeRefused
	case answer.stuckReason != "":
		return chargeOutcomeNeedsReview
	}
	return chargeOutcomeCharged
}

// logStripeCall logs one line per charge sent to Stripe, with Stripe's own id of the call
// (its Request-Id header), which is what Stripe's dashboard and support ask for. A call that
// got no answer has none. The line carries our request id too, from ctx (see
// internal/requestid), so that a ride request and the Stripe calls it made can be matched.
func (e *Executor) logStripeCall(ctx context.Context, r *run, took time.Duration, charge *stripe.Charge, err error, outcome string) {
	attrs := []slog.Attr{
		slog.Int64("ride_id", r.ride.ID),
		slog.Int64("idempotency_key_id", r.key.ID),
		slog.String("outcome", outcome),
		slog.Duration("duration", took),
	}
	var stripeErr *stripe.Error
	switch {
	case err == nil && charge != nil:
		attrs = append(attrs, slog.String("stripe_charge_id", charge.ID))
		if charge.LastResponse != nil {
			attrs = append(attrs, slog.String("stripe_request_id", charge.LastResponse.RequestID))
		}
	case errors.As(err, &stripeErr):
		attrs = append(attrs, slog.String("stripe_request_id", stripeErr.RequestID),
			slog.Int("stripe_status", stripeErr.HTTPStatusCode), slog.String("error", err.Error()))
	case err != nil:
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	level := slog.LevelInfo
	if outcome == chargeOutcomeUnavailable || outcome == chargeOutcomeError {
		level = slog.LevelWarn
	}
	e.logger.LogAttrs(ctx, level, "Phases: charge sent to Stripe", attrs...)
}
