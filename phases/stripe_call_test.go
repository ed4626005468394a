package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
)

// TestChargeOutcome pins how every kind of failed charge is sorted: refused for good
// (stored 402), stuck at Stripe (stored 500 for review), or indeterminate (503, retried).
func TestChargeOutcome(t *testing.T) {
	t.Parallel()

	replayed := func(e *stripe.Error) *stripe.Error {
		e.LastResponse = &stripe.APIResponse{Header: http.Header{"Idempotent-Replayed": []string{"true"}}}
		return e
	}
	tests := []struct {
		name    string
		err     error
		refusal problem.Code // "" when not a definitive refusal
		stuck   string       // "" when not stuck
		retry   bool         // indeterminate: retried with the same key
	}{
		{"CardDeclined", &stripe.Error{Type: stripe.ErrorTypeCard, HTTPStatusCode: 402, Msg: "Your card has insufficient funds.",
			DeclineCode: stripe.DeclineCodeInsufficientFunds}, problem.CodeCardDeclined, "", false},
		{"CardDeclinedWithoutMessage", &stripe.Error{Type: stripe.ErrorTypeCard, HTTPStatusCode: 402}, problem.CodeCardDeclined, "", false},
		{"NoSuchCustomer", &stripe.Error{Type: stripe.ErrorTypeInvalidRequest, HTTPStatusCode: 400,
			Msg: "No such customer: 'cus_secret'", Param: "customer", Code: stripe.ErrorCodeResourceMissing}, problem.CodePaymentRejected, "", false},
		{"NotFound", &stripe.Error{Type: stripe.ErrorTypeInvalidRequest, HTTPStatusCode: 404, Msg: "Unrecognized request URL (POST: /v1/chargez)."}, problem.CodePaymentRejected, "", false},
		{"OurAPIKeyRejected", &stripe.Error{Type: stripe.ErrorTypeInvalidRequest, HTTPStatusCode: 401}, "", "", true},
		{"Forbidden", &stripe.Error{Type: stripe.ErrorTypeInvalidRequest, HTTPStatusCode: 403}, "", "", true},
		{"RateLimited", &stripe.Error{Type: stripe.ErrorTypeInvalidRequest, HTTPStatusCode: 429}, "", "", true},
		{"KeyInFlightElsewhere", &stripe.Error{Type: stripe.ErrorTypeIdempotency, HTTPStatusCode: 409}, "", "", true},
		{"ServerError", &stripe.Error{Type: stripe.ErrorTypeAPI, HTTPStatusCode: 500}, "", "", true},
		{"BadGateway", &stripe.Error{HTTPStatusCode: 502}, "", "", true},
		{"ServerErrorReplayed", replayed(&stripe.Error{Type: stripe.ErrorTypeAPI, HTTPStatusCode: 500}), "", models.AbandonedReasonStripeReplayedError, true},
		{"KeyUsedWithOtherParams", &stripe.Error{Type: stripe.ErrorTypeIdempotency, HTTPStatusCode: 400}, "", models.AbandonedReasonStripeKeyConflict, false},
		{"NetworkError", fmt.Errorf("Post: %w", errors.New("connection reset by peer")), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			refusal := definitiveRefusal(tt.err)
			switch {
			case tt.refusal == "" && refusal != nil:
				t.Fatalf("want no refusal, got %s", refusal.Code)
			case tt.refusal != "" && (refusal == nil || refusal.Code != tt.refusal || refusal.Status != 402):
				t.Fatalf("want a 402 %s, got %+v", tt.refusal, refusal)
			}
			if refusal != nil {
				requireRefusalWording(t, tt.err, refusal)
			}
			if got := stuckAtStripe(tt.err); got != tt.stuck {
				t.Fatalf("want stuck %q, got %q", tt.stuck, got)
			}
			// stuckAtStripe is asked before isIndeterminate, which only matters for the rest.
			if tt.refusal == "" && tt.stuck == "" && isIndeterminate(tt.err) != tt.retry {
				t.Fatalf("want indeterminate=%t", tt.retry)
			}
			// The outcome the Stripe call's log line names follows the same sorting.
			want := StripeError
			switch {
			case tt.refusal != "":
				want = StripeOutcome(tt.refusal) // the problem code the rider gets
			case tt.stuck != "":
				want = StripeNeedsReview
			case tt.retry:
				want = StripeUnavailable
			}
			if got := sortChargeAnswer(1, nil, tt.err).outcome; got != want {
				t.Fatalf("want outcome %q, got %q", want, got)
			}
		})
	}
}

// requireRefusalWording checks what of Stripe's error a stored refusal passes on to the rider:
// for a card error, Stripe's message and decline code, written for the card's holder; for any
// other refusal nothing at all, since its message is about our request and names our ids.
func requireRefusalWording(t *testing.T, err error, refusal *problem.Problem) {
	t.Helper()
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		t.Fatalf("a refusal from a non-Stripe error %v", err)
	}
	if refusal.Detail == "" {
		t.Fatalf("want a detail, got %+v", refusal)
	}
	if stripeErr.Type == stripe.ErrorTypeCard {
		if stripeErr.Msg != "" && refusal.Detail != stripeErr.Msg {
			t.Fatalf("want Stripe's message for the card holder %q, got %q", stripeErr.Msg, refusal.Detail)
		}
		if refusal.DeclineCode != string(stripeErr.DeclineCode) {
			t.Fatalf("want decline_code %q, got %q", stripeErr.DeclineCode, refusal.DeclineCode)
		}
		return
	}
	body, _ := json.Marshal(refusal)
	for _, leak := range []string{stripeErr.Msg, stripeErr.Param, string(stripeErr.Code), "cus_", "Stripe"} {
		if leak != "" && strings.Contains(string(body), leak) {
			t.Fatalf("want none of Stripe's error in the stored refusal, found %q in %s", leak, body)
		}
	}
}

// stripeCallKind is a request type whose Stripe call the tables below fail: the booking's
// charge or the cancel's refund. Each table runs its every row for both, so that the two calls
// are held to the same promises.
type stripeCallKind struct {
	name string

	// key is the request's Idempotency-Key, and unsettled the recovery point the key waits at
	// while the call is unsettled.
	key       string
	unsettled models.RecoveryPoint

	// start readies the request (a cancel needs a booked ride) and returns how to send it.
	start func(t *testing.T, b *testBundle) sendFunc

	// inject queues faults for the call's endpoint at the stand-in.
	inject func(s *fakestripe.Server, fault fakestripe.FaultKind, n int)

	// made counts the charges (failed ones too) or refunds Stripe holds. requests counts the
	// calls that reached Stripe; it is nil where the stand-in does not count them (refunds).
	made     func(b *testBundle) int
	requests func(b *testBundle) int

	// changeParams changes what the next call sends under the same Stripe idempotency key.
	changeParams func(t *testing.T, b *testBundle)

	// requireDoneOnce checks the answer of a request that settled its call: the success, and
	// one charge or refund at Stripe, recorded.
	requireDoneOnce func(t *testing.T, b *testBundle, outcome *Outcome, err error)
}

var stripeCallKinds = []stripeCallKind{
	{
		name: "Charge", key: testKey, unsettled: models.RecoveryPointRideCreated,
		start: func(t *testing.T, b *testBundle) sendFunc {
			return func(ctx context.Context, e *Executor) (*Outcome, error) {
				return e.CreateRide(ctx, newRequest(b.Rider))
			}
		},
		inject:   (*fakestripe.Server).InjectChargeFaults,
		made:     func(b *testBundle) int { return len(b.Stripe.Charges()) },
		requests: func(b *testBundle) int { return b.Stripe.ChargeRequests() },
		// The rider's Stripe customer changes: the request's user is the rider's.
		changeParams: func(t *testing.T, b *testBundle) {
			b.Rider.StripeCustomerID = b.NewRider(t, "tok_visa").StripeCustomerID
		},
		requireDoneOnce: func(t *testing.T, b *testBundle, outcome *Outcome, err error) {
			requireCreated(t, outcome, err)
			b.requireOneChargedRide(t, b.Rider)
		},
	},
	{
		name: "Refund", key: cancelKey, unsettled: models.RecoveryPointStarted,
		start: func(t *testing.T, b *testBundle) sendFunc {
			ride := b.bookedRide(t, b.Rider)
			return func(ctx context.Context, e *Executor) (*Outcome, error) {
				return e.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
			}
		},
		inject: (*fakestripe.Server).InjectRefundFaults,
		made:   func(b *testBundle) int { return len(b.Stripe.Refunds()) },
		// The ride's charge changes. Stripe compares a key's params before it looks up the
		// charge they name, so the charge need not exist.
		changeParams: func(t *testing.T, b *testBundle) {
			b.Exec(t, `UPDATE rides SET stripe_charge_id = 'ch_not_the_first' WHERE user_id = $1`, b.Rider.ID)
		},
		requireDoneOnce: func(t *testing.T, b *testBundle, outcome *Outcome, err error) {
			b.requireOneRefundedRide(t, b.Rider, requireCancelled(t, outcome, err))
		},
	},
}

// TestStripeCallRetried fails a Stripe call in every way a retry can settle: nothing is stored,
// the key is left unlocked for the retry, and the retry charges or refunds exactly once.
func TestStripeCallRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	tests := []struct {
		name  string
		first firstAttempt

		// resume retries as the completer does (Resume of the stored key), not as the client.
		resume bool
	}{
		{name: "Stripe500IsNotStoredAndRetrySucceeds", first: firstAttempt{fault: fakestripe.FaultError500}},
		{name: "MadeButConnectionDroppedRetryGetsTheSameOne", first: firstAttempt{fault: fakestripe.FaultChargeThenDrop,
			executor: freshConnExecutor, wantMade: 1}},
		// The request's own timeout is an hour, and the stand-in holds the call for minutes
		// (fakestripe's TimeoutFaultHang): a call that ends within one gave up on the Stripe
		// timeout, however loaded the machine.
		{name: "StripeTimeoutIsNotStored", first: firstAttempt{fault: fakestripe.FaultTimeout,
			executor: hourLongExecutor, giveUpWithin: time.Minute}},
		{name: "StripeRejectingOurAPIKeyIsNotStored", first: firstAttempt{executor: foreignAPIKeyExecutor}},
		{name: "AttemptJustUnder23HoursIsResent", first: firstAttempt{fault: fakestripe.FaultError500,
			age: "22 hours 59 minutes"}},
		{name: "MadeButNotRecordedIsRecoveredByRetry", first: firstAttempt{failRecord: true, wantErr: errInjected,
			wantMade: 1}},
		{name: "MadeButNotRecordedIsRecoveredByTheCompleter", first: firstAttempt{failRecord: true, wantErr: errInjected,
			wantMade: 1}, resume: true},
	}
	for _, tt := range tests {
		runPerKind(t, tt.name, func(t *testing.T, b *testBundle, kind stripeCallKind, send sendFunc) {
			key := kind.failFirst(t, b, send, tt.first)
			var outcome *Outcome
			var err error
			if tt.resume {
				outcome, err = b.executor.Resume(ctx, b.Rider.User, key)
			} else {
				outcome, err = send(ctx, b.executor)
			}
			kind.requireDoneOnce(t, b, outcome, err)
		})
	}
}

// TestStripeCallNeedsReview fails a Stripe call in every way no retry can settle: the retry
// stores a 500 payment_needs_review and records the request for a person, and makes no charge
// or refund.
func TestStripeCallNeedsReview(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		first firstAttempt

		// changeParams changes, before the retry, what it sends.
		changeParams bool

		// wantReason is why the request awaits review, and wantResent whether the retry asked
		// Stripe again.
		wantReason string
		wantResent bool
	}{
		// The first 500 may be a passing failure; the retry gets the same 500 replayed by
		// Stripe, and retrying can never settle it.
		{name: "SavedStripeErrorIsNotRetriedForever", first: firstAttempt{fault: fakestripe.FaultError500Saved},
			wantReason: models.AbandonedReasonStripeReplayedError, wantResent: true},
		{name: "StripeKeyUsedWithOtherParamsNeedsReview", first: firstAttempt{fault: fakestripe.FaultChargeThenDrop,
			executor: freshConnExecutor, wantMade: 1}, changeParams: true,
			wantReason: models.AbandonedReasonStripeKeyConflict, wantResent: true},
		// Stripe forgets idempotency keys after 24 hours.
		{name: "AttemptOlderThan23HoursIsNotResent", first: firstAttempt{fault: fakestripe.FaultTimeout,
			age: "23 hours 1 minute"}, wantReason: models.AbandonedReasonStripeKeyExpired},
	}
	for _, tt := range tests {
		runPerKind(t, tt.name, func(t *testing.T, b *testBundle, kind stripeCallKind, send sendFunc) {
			kind.failFirst(t, b, send, tt.first)
			if tt.changeParams {
				kind.changeParams(t, b)
			}
			requests := 0
			if kind.requests != nil {
				requests = kind.requests(b)
			}
			outcome, err := send(t.Context(), b.executor)
			kind.requireNeedsReview(t, b, outcome, err, tt.wantReason)
			if kind.requests != nil && (kind.requests(b) > requests) != tt.wantResent {
				t.Fatalf("want the call re-sent: %t; Stripe saw %d calls, then %d", tt.wantResent, requests, kind.requests(b))
			}
			if n := kind.made(b); n != tt.first.wantMade {
				t.Fatalf("want Stripe to hold %d still, got %d", tt.first.wantMade, n)
			}
		})
	}
}

// sendFunc sends a request with an executor.
type sendFunc func(context.Context, *Executor) (*Outcome, error)

// runPerKind runs test as the parallel subtest name, and in it a parallel subtest per
// stripeCallKind, each on a bundle of its own with the kind's request ready to send.
func runPerKind(t *testing.T, name string, test func(t *testing.T, b *testBundle, kind stripeCallKind, send sendFunc)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		for _, kind := range stripeCallKinds {
			t.Run(kind.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				test(t, b, kind, kind.start(t, b))
			})
		}
	})
}

// firstAttempt is how a row fails a request's first attempt, and what it expects of it.
type firstAttempt struct {
	// fault is how the stand-in meets the call; executor, if set, sends it instead of the
	// bundle's own; failRecord fails, once, the atomic phase that records what Stripe made.
	fault      fakestripe.FaultKind
	executor   func(b *testBundle) *Executor
	failRecord bool

	// wantErr is the attempt's error (nil: a PaymentUnavailableError), wantMade how many
	// charges or refunds Stripe holds after it, and giveUpWithin, if set, how long it may take.
	wantErr      error
	wantMade     int
	giveUpWithin time.Duration

	// age moves the attempt this far back once it failed, as if that much time had passed.
	age string
}

// failFirst sends a request of kind as first says and requires it to fail so: with no answer
// stored, the attempt noted, and the key unlocked where a retry sends the call again. It
// returns the key.
func (kind stripeCallKind) failFirst(t *testing.T, b *testBundle, send sendFunc, first firstAttempt) *models.IdempotencyKey {
	t.Helper()
	if first.fault != "" {
		kind.inject(b.Stripe.Server, first.fault, 1)
	}
	if first.failRecord {
		b.executor.hooks.inPhase = kind.failRecordOnce(b)
	}
	e := b.executor
	if first.executor != nil {
		e = first.executor(b)
	}
	start := time.Now()
	_, err := send(context.Background(), e)
	took := time.Since(start)
	var unavailable *PaymentUnavailableError
	switch {
	case first.wantErr == nil && !errors.As(err, &unavailable):
		t.Fatalf("want PaymentUnavailableError, got %v", err)
	case first.wantErr != nil && !errors.Is(err, first.wantErr):
		t.Fatalf("want %v, got %v", first.wantErr, err)
	case first.giveUpWithin != 0 && took > first.giveUpWithin:
		t.Fatalf("want the call to give up after the Stripe timeout (%s), took %s", ridetest.StripeTimeout, took)
	}
	key := b.requireKeyUnlockedAt(t, b.Rider, kind.key, kind.unsettled)
	if key.ResponseCode != nil || key.ForeignMutationAttemptedAt == nil {
		t.Fatalf("want no stored response and a recorded attempt, got %v %v", key.ResponseCode, key.ForeignMutationAttemptedAt)
	}
	if n := kind.made(b); n != first.wantMade {
		t.Fatalf("want Stripe to hold %d after the failure, got %d", first.wantMade, n)
	}
	if first.age != "" {
		b.Exec(t, `UPDATE idempotency_keys SET charge_attempted_at = charge_attempted_at - $2::interval
			WHERE idempotency_key = $1`, kind.key, first.age)
	}
	return key
}

// failRecordOnce returns an inPhase hook that fails, once, the first phase at kind's unsettled
// recovery point that runs after Stripe made the call: the one that records it.
func (kind stripeCallKind) failRecordOnce(b *testBundle) func(context.Context, models.DBTX, models.RecoveryPoint) error {
	failed := false
	return func(_ context.Context, _ models.DBTX, p models.RecoveryPoint) error {
		if p == kind.unsettled && !failed && kind.made(b) > 0 {
			failed = true
			return errInjected
		}
		return nil
	}
}

// requireNeedsReview checks a request that no retry can settle: its stored 500
// payment_needs_review, its key finished, and its record for review, with its ride and error.
func (kind stripeCallKind) requireNeedsReview(t *testing.T, b *testBundle, outcome *Outcome, err error, reason string) {
	t.Helper()
	requireProblem(t, outcome, err, 500, problem.CodePaymentNeedsReview)
	key := b.keyNamed(t, b.Rider, kind.key)
	if key.RecoveryPoint != models.RecoveryPointFinished {
		t.Fatalf("want key finished, got %s", key.RecoveryPoint)
	}
	if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE reason = $1 AND idempotency_key_id = $2 AND ride_id IS NOT NULL AND last_error <> ''`,
		reason, key.ID); n != 1 {
		t.Fatalf("want the request recorded for review as %s, got %d rows", reason, n)
	}
}

// freshConnExecutor sends over a new connection each time, so that a dropped one is seen (see
// ridetest.Bundle.FreshConnStripeClient).
func freshConnExecutor(b *testBundle) *Executor {
	return New(b.Pool, b.FreshConnStripeClient(), b.executor.logger, Config{})
}

// hourLongExecutor gives a request, its phases and its lease an hour or more.
func hourLongExecutor(b *testBundle) *Executor {
	return New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{
		LockLease: time.Hour, ConflictRetryBudget: 30 * time.Second, PhaseTimeout: time.Minute, RequestTimeout: time.Hour,
	})
}

// foreignAPIKeyExecutor calls Stripe with an API key that Stripe rejects.
func foreignAPIKeyExecutor(b *testBundle) *Executor {
	stripe := stripeclient.New(stripeclient.Config{APIKey: "sk_live_not_ours", URL: b.Stripe.URL, Timeout: ridetest.StripeTimeout})
	return New(b.Pool, stripe, b.executor.logger, Config{})
}
