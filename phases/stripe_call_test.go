package phases

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
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
