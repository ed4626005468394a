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

// stripeCall is one call to Stripe as its log line tells it: a charge or a refund.
type stripeCall struct {
	kind     string // "charge" or "refund"
	took     time.Duration
	objectID string              // the charge's or refund's id, when Stripe made one
	response *stripe.APIResponse // Stripe's answer to a call that succeeded
	err      error
	outcome  string // a ChargeOutcome or a RefundOutcome
	reason   string // why the call needs review, if it does
}

// logStripeCall logs one line per charge or refund sent to Stripe, with Stripe's own id of the
// call (its Request-Id header), which is what Stripe's dashboard and support ask for. A call that
// got no answer has none. The line carries our request id too, from ctx (see
// internal/requestid), so that a request and the Stripe calls it made can be matched.
func (e *Executor) logStripeCall(ctx context.Context, r *run, call stripeCall) {
	attrs := []slog.Attr{
		slog.Int64("ride_id", r.ride.ID),
		slog.Int64("idempotency_key_id", r.key.ID),
		slog.String("outcome", call.outcome),
		slog.Duration("duration", call.took),
	}
	if call.reason != "" {
		attrs = append(attrs, slog.String("reason", call.reason))
	}
	var stripeErr *stripe.Error
	switch {
	case call.err == nil && call.objectID != "":
		attrs = append(attrs, slog.String("stripe_"+call.kind+"_id", call.objectID))
		if call.response != nil {
			attrs = append(attrs, slog.String("stripe_request_id", call.response.RequestID))
		}
	case errors.As(call.err, &stripeErr):
		attrs = append(attrs, slog.String("stripe_request_id", stripeErr.RequestID),
			slog.Int("stripe_status", stripeErr.HTTPStatusCode), slog.String("error", call.err.Error()))
	case call.err != nil:
		attrs = append(attrs, slog.String("error", call.err.Error()))
	}
	level := slog.LevelInfo
	if call.outcome == string(ChargeUnavailable) || call.outcome == string(ChargeError) {
		level = slog.LevelWarn
	}
	e.logger.LogAttrs(ctx, level, "Phases: "+call.kind+" sent to Stripe", attrs...)
}
