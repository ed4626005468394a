package phases

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// ChargeOutcome is what became of a charge sent to Stripe. Its values are the one vocabulary of
// a charge's outcome: the log line of the call names it, rocketrides_ride_requests_total counts
// the requests that ended so, and, but for a charge made, it is the problem code the rider gets.
// A charge that needs review carries its reason too, a models.AbandonedReason*.
type ChargeOutcome string

// The outcomes of a charge.
const (
	ChargeCharged     ChargeOutcome = "charged"                                              // Stripe charged, or replayed a charge
	ChargeDeclined    ChargeOutcome = ChargeOutcome(problem.CodeCardDeclined)                // the card was declined: a stored 402
	ChargeRejected    ChargeOutcome = ChargeOutcome(problem.CodePaymentRejected)             // Stripe refused the charge for good: a stored 402
	ChargeUnavailable ChargeOutcome = ChargeOutcome(problem.CodePaymentProcessorUnavailable) // no definitive answer: a retry asks again
	ChargeNeedsReview ChargeOutcome = ChargeOutcome(problem.CodePaymentNeedsReview)          // no retry can settle it: recorded for a person
	ChargeError       ChargeOutcome = "error"                                                // anything else, our bug
)

// chargeOutcome names what sortChargeAnswer made of a charge.
func chargeOutcome(answer *chargeAnswer, err error) ChargeOutcome {
	var unavailable *PaymentUnavailableError
	switch {
	case errors.As(err, &unavailable):
		return ChargeUnavailable
	case err != nil:
		return ChargeError
	case answer.refusal != nil && answer.refusal.Code == problem.CodeCardDeclined:
		return ChargeDeclined
	case answer.refusal != nil:
		return ChargeRejected
	case answer.stuckReason != "":
		return ChargeNeedsReview
	}
	return ChargeCharged
}

// logStripeCall logs one line per charge sent to Stripe, with Stripe's own id of the call
// (its Request-Id header), which is what Stripe's dashboard and support ask for. A call that
// got no answer has none. The line carries our request id too, from ctx (see
// internal/requestid), so that a ride request and the Stripe calls it made can be matched.
func (e *Executor) logStripeCall(ctx context.Context, r *run, took time.Duration, charge *stripe.Charge, err error, answer *chargeAnswer, outcome ChargeOutcome) {
	attrs := []slog.Attr{
		slog.Int64("ride_id", r.ride.ID),
		slog.Int64("idempotency_key_id", r.key.ID),
		slog.String("outcome", string(outcome)),
		slog.Duration("duration", took),
	}
	if outcome == ChargeNeedsReview {
		attrs = append(attrs, slog.String("reason", answer.stuckReason))
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
	if outcome == ChargeUnavailable || outcome == ChargeError {
		level = slog.LevelWarn
	}
	e.logger.LogAttrs(ctx, level, "Phases: charge sent to Stripe", attrs...)
}
