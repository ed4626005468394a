package phases

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// foreignMutation describes a request's one foreign state mutation: a Stripe call that no
// database transaction can roll back (a ride's charge, a cancel's refund). Both go through the
// same three steps (see charge_ride.go), and this file holds what the steps of both share.
type foreignMutation struct {
	// name is the call in log lines and review details: "charge" or "refund".
	name string

	// from is the recovery point the key holds until the call's answer is recorded.
	from models.RecoveryPoint

	// next fires once atomic phase 1 has committed with the call next; answered fires once
	// Stripe made it and nothing has recorded that yet (see FaultPoint).
	next, answered FaultPoint

	// unsure is what the rider is told when no retry can settle the call.
	unsure string
}

// StripeOutcome is what became of a Stripe call. Its values are the one vocabulary of a call's
// outcome: the call's log line names it, rocketrides_ride_requests_total counts the bookings
// that ended so, and, for a refusal or an unsettled call, it is the problem code the rider gets.
type StripeOutcome string

// The outcomes of a charge or a refund.
const (
	StripeCharged     StripeOutcome = "charged"                                              // Stripe charged, or replayed a charge
	StripeRefunded    StripeOutcome = "refunded"                                             // Stripe refunded, or replayed a refund
	StripeDeclined    StripeOutcome = StripeOutcome(problem.CodeCardDeclined)                // the card was declined: a stored 402
	StripeRejected    StripeOutcome = StripeOutcome(problem.CodePaymentRejected)             // a charge refused for good: a stored 402
	StripeRefused     StripeOutcome = "refused"                                              // a refund of a charge refunded or disputed already
	StripeUnavailable StripeOutcome = StripeOutcome(problem.CodePaymentProcessorUnavailable) // no definitive answer: a retry asks again
	StripeNeedsReview StripeOutcome = StripeOutcome(problem.CodePaymentNeedsReview)          // no retry can settle it: recorded for a person
	StripeError       StripeOutcome = "error"                                                // anything else: our bug
)

// PaymentUnavailableError means Stripe could not be asked, or did not answer definitively:
// a timeout, a dropped connection, a 5xx, a rate limit, or a rejection of our own API key.
// Nothing is stored; a retry re-sends the charge with the same Stripe idempotency key, so a
// charge that did go through is replayed by Stripe rather than made twice.
type PaymentUnavailableError struct {
	Err error
}

func (e *PaymentUnavailableError) Error() string {
	return "payment processor unavailable: " + e.Err.Error()
}

func (e *PaymentUnavailableError) Unwrap() error { return e.Err }

// stripeAnswer is what became of a Stripe call. The next atomic phase records it, unless
// failure says the call is to be sent again.
type stripeAnswer struct {
	outcome StripeOutcome

	// stripeErr is Stripe's error, for the call's log line. failure is the error the request
	// stops with, to be retried: a PaymentUnavailableError, or our own bug.
	stripeErr, failure error

	// made is the charge or refund Stripe made, when it made it.
	made *stripeMade

	// refusal is the response that settles a request Stripe refused for good, and raiseTo the
	// ride status that the refusal tells of.
	refusal *Response
	raiseTo models.RideStatus

	// stuckReason and stuckDetail say why retrying can never settle the call (a
	// models.AbandonedReason*, and Stripe's error).
	stuckReason, stuckDetail string
}

// header is the HTTP headers of Stripe's answer, nil if Stripe made nothing.
func (a *stripeAnswer) header() map[string][]string {
	if a.made == nil {
		return nil
	}
	return a.made.LastResponse.Header
}

// stripeMade is the charge or refund a call made, as the phases record and log it. stripe-go's
// Charge decodes Stripe's answer several times over (the charge, then its source, then its card)
// into fields nobody here reads: decoded once into these few, a booking costs the API a good part
// less CPU (docs/performance.md).
type stripeMade struct {
	stripe.APIResource // LastResponse: Stripe's request id and headers

	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

// prepareStripeCall is the last phase of atomic phase 1: it gets the ride, and ends the atomic
// phase, as the Stripe call is next. The key notes, as the phase commits, that the call is
// about to be attempted. A call first attempted longer ago than Config.StripeKeyMaxAge goes to
// a person instead: Stripe may have forgotten its idempotency key, and sending it again could
// charge or refund twice.
func (e *Executor) prepareStripeCall(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	if err := e.loadRide(ctx, tx, r); err != nil {
		return nil, err
	}
	if r.key.ForeignMutationAttemptedAt != nil {
		expired, err := models.IdempotencyKeyForeignMutationOlderThan(ctx, tx, r.key.UserID, r.key.ID, e.config.StripeKeyMaxAge)
		if err != nil {
			return nil, err
		}
		if expired {
			return e.needsReview(ctx, tx, r, models.AbandonedReasonStripeKeyExpired,
				"the first "+r.req.mutation.name+" attempt is older than Stripe's idempotency key memory")
		}
	}
	return ForeignMutationNext{}, nil
}

// callStripe sends the request's foreign state mutation and logs it. It keeps Stripe's answer
// on r for the next atomic phase to record, and fires the mutation's answered fault point when
// Stripe made the charge or refund.
func (e *Executor) callStripe(ctx context.Context, r *run) error {
	start := time.Now()
	ctx, span := tracing.StartForeignMutation(ctx, r.req.mutation.name)
	answer := r.req.send(ctx, r)
	tracing.EndForeignMutation(span, string(answer.outcome), answer.header(), answer.failure)
	e.logStripeCall(ctx, r, answer, time.Since(start))
	if e.hooks.afterStripeCall != nil {
		e.hooks.afterStripeCall(ctx)
	}
	if answer.failure != nil {
		return answer.failure
	}
	if answer.made != nil {
		e.faultPoint(ctx, r.req.mutation.answered)
	}
	r.answer = answer
	return nil
}

// sortFailure sorts a failed call that is not a refusal: stuck for good (Stripe will answer
// every retry the same way), worth a retry with the same key (PaymentUnavailableError), or our
// own bug.
func sortFailure(err error, what string, rideID int64) *stripeAnswer {
	if reason := stuckAtStripe(err); reason != "" {
		return &stripeAnswer{outcome: StripeNeedsReview, stripeErr: err, stuckReason: reason, stuckDetail: err.Error()}
	}
	if isIndeterminate(err) {
		return &stripeAnswer{outcome: StripeUnavailable, stripeErr: err, failure: &PaymentUnavailableError{Err: err}}
	}
	return &stripeAnswer{outcome: StripeError, stripeErr: err, failure: fmt.Errorf("error %s ride %d: %w", what, rideID, err)}
}

// logStripeCall logs one line per call to Stripe. The line carries Stripe's own id of the call
// (its Request-Id header, on the LastResponse that stripe-go gives every charge, refund and
// error it returns), which Stripe's dashboard and support ask for; a call that got no answer
// has none. It carries our request id too, from ctx (see internal/requestid), so that a request
// and its Stripe calls can be matched.
func (e *Executor) logStripeCall(ctx context.Context, r *run, answer *stripeAnswer, took time.Duration) {
	attrs := []slog.Attr{
		slog.Int64("ride_id", r.ride.ID),
		slog.Int64("idempotency_key_id", r.key.ID),
		slog.String("outcome", string(answer.outcome)),
		slog.Duration("duration", took),
	}
	if answer.stuckReason != "" {
		attrs = append(attrs, slog.String("reason", answer.stuckReason))
	}
	var stripeErr *stripe.Error
	switch {
	case answer.made != nil:
		attrs = append(attrs, slog.String("stripe_"+r.req.mutation.name+"_id", answer.made.ID),
			slog.String("stripe_request_id", answer.made.LastResponse.RequestID))
	case errors.As(answer.stripeErr, &stripeErr):
		attrs = append(attrs, slog.String("stripe_request_id", stripeErr.RequestID),
			slog.Int("stripe_status", stripeErr.HTTPStatusCode), slog.String("error", answer.stripeErr.Error()))
	case answer.stripeErr != nil:
		attrs = append(attrs, slog.String("error", answer.stripeErr.Error()))
	}
	level := slog.LevelInfo
	if answer.failure != nil {
		level = slog.LevelWarn
	}
	e.logger.LogAttrs(ctx, level, "Phases: "+r.req.mutation.name+" sent to Stripe", attrs...)
}

// recordFailedCall records an answer in which Stripe made no charge or refund: a refusal for
// good, or a call that a person must review. It returns no action for a call Stripe made.
func (e *Executor) recordFailedCall(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	switch {
	case r.answer == nil:
		return nil, fmt.Errorf("bug: key %d at %s with no %s sent", r.key.ID, r.key.RecoveryPoint, r.req.mutation.name)
	case r.answer.refusal != nil:
		return recordRefusal(tx, r, r.answer), nil
	case r.answer.stuckReason != "":
		return e.needsReview(ctx, tx, r, r.answer.stuckReason, r.answer.stuckDetail)
	}
	return nil, nil
}

// recordRefusal stores the response to a call Stripe refused for good, and raises the ride to
// the status the refusal tells of.
func recordRefusal(tx *phaseTx, r *run, answer *stripeAnswer) Response {
	models.RideRaiseStatusByID(&tx.Writes, r.ride.UserID, r.ride.ID, answer.raiseTo)
	r.ride.Status = r.ride.Status.Raise(answer.raiseTo)
	return *answer.refusal
}

// needsReview finishes a request whose Stripe call no retry can settle. It records the request
// in abandoned_requests for a person, and stores a 500 that tells the rider so.
func (e *Executor) needsReview(ctx context.Context, tx *phaseTx, r *run, reason, detail string) (PhaseAction, error) {
	recorded := *r.key
	recorded.LastError = &detail
	models.AbandonedRequestQueueFromKey(&tx.Writes, &recorded, reason, &r.ride.ID)
	e.logger.ErrorContext(ctx, "Phases: Stripe call cannot be settled by retrying; recorded for review",
		slog.Int64("idempotency_key_id", r.key.ID), slog.Int64("ride_id", r.ride.ID),
		slog.String("reason", reason), slog.String("detail", detail))
	return Response{Status: statusInternalServerError, Body: problem.New(statusInternalServerError,
		problem.CodePaymentNeedsReview, "Payment needs review", r.req.mutation.unsure)}, nil
}

// definitiveRefusal returns the problem to store when Stripe refused a call for good: the card
// was declined, or the call can never succeed as sent (no such customer, say: an invalid request
// that isIndeterminate does not leave to a retry). Retrying would only be refused again.
//
// Stripe's own words reach the rider only for a card error: Stripe writes that message, and
// its decline_code, for the card's holder ("Your card has insufficient funds."). Any other
// refusal is about our request, not the card. Its message names our own identifiers ("No such
// customer: 'cus_…'"), so the rider gets fixed text, and the full error goes to the call's log
// line (logStripeCall), with Stripe's request id.
func definitiveRefusal(err error) *problem.Problem {
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		return nil
	}
	switch {
	case stripeErr.Type == stripe.ErrorTypeCard:
		p := problem.New(statusPaymentRequired, problem.CodeCardDeclined, "Card declined",
			cmp.Or(stripeErr.Msg, cardDeclinedDetail))
		p.DeclineCode = string(stripeErr.DeclineCode)
		return p
	case stripeErr.Type == stripe.ErrorTypeInvalidRequest && !isIndeterminate(err):
		return problem.New(statusPaymentRequired, problem.CodePaymentRejected, "Payment rejected", paymentRejectedDetail)
	}
	return nil
}

// The details of the stored 402s where Stripe's message is not passed on: a card error without
// one (Stripe always sends one, but the rider must be told something), and every other refusal.
const (
	cardDeclinedDetail    = "Your card was declined."
	paymentRejectedDetail = "The payment processor refused this charge, and retrying will not change that. Check the card on your account or contact support."
)

// stuckAtStripe names why a failed call can never be settled by sending it again with the same
// idempotency key, or returns "" if it can be:
//   - Stripe saved a failure under our key and replays it to every retry. It does so for errors
//     that happen once a request began executing, 500s included.
//   - Stripe refuses our key because it was first used with other parameters.
func stuckAtStripe(err error) string {
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		return ""
	}
	switch {
	case stripeErr.Type == stripe.ErrorTypeIdempotency && stripeErr.HTTPStatusCode == 400:
		return models.AbandonedReasonStripeKeyConflict
	case stripeErr.HTTPStatusCode >= 500 && stripeErr.LastResponse != nil &&
		stripeErr.LastResponse.Header.Get("Idempotent-Replayed") == "true":
		return models.AbandonedReasonStripeReplayedError
	}
	return ""
}

// isIndeterminate reports whether a failed call may be sent again with the same idempotency
// key: Stripe was unreachable or overloaded, the answer was lost, another request with our key
// was in flight, or Stripe rejected our own credentials (our misconfiguration, which we can
// fix). Anything else is a bug on our side.
func isIndeterminate(err error) bool {
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		// Timeouts, resets and refused connections reach us as plain Go errors.
		return true
	}
	switch stripeErr.HTTPStatusCode {
	case 401, 403, 409, 429:
		return true
	}
	return stripeErr.HTTPStatusCode >= 500 || stripeErr.HTTPStatusCode == 0
}
