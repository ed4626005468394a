package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// pinnedCode is one stable problem code, spelled out as clients see it, with its status and a
// request that gets it.
type pinnedCode struct {
	code     string       // the promise to clients, written out
	constant problem.Code // what the code under test answers with
	status   int
	opts     setupOpts

	// provoke sends requests until one is answered with the code, and returns that answer. Nil
	// for a code no cheap request provokes; TestErrFromPhases covers how it is chosen.
	provoke func(t *testing.T, b *testBundle) *response
}

// pinnedCodes are the problem codes clients branch on. Renaming one breaks every client that
// knows it, so each is written here as a literal, not through the constant the API uses.
var pinnedCodes = []pinnedCode{
	{code: "card_declined", constant: problem.CodeCardDeclined, status: 402,
		provoke: func(t *testing.T, b *testBundle) *response { return b.postRide(t, b.DecliningRider, testKey, testBody) }},
	{code: "duplicate_header", constant: problem.CodeDuplicateHeader, status: 400,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.doHeader(t, http.MethodPost, "/rides", http.Header{
				"Authorization": {"Bearer " + b.Rider.Token}, "Idempotency-Key": {testKey, testKey + "-2"}}, testBody)
		}},
	{code: "idempotency_key_in_use", constant: problem.CodeIdempotencyKeyInUse, status: 409, opts: setupOpts{simulateErrors: true},
		provoke: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
			b.Exec(t, `UPDATE idempotency_keys SET locked_at = now(), locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1`)
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`)
		}},
	{code: "idempotency_key_invalid", constant: problem.CodeIdempotencyKeyInvalid, status: 400,
		provoke: func(t *testing.T, b *testBundle) *response { return b.postRide(t, b.Rider, "too-short", testBody) }},
	{code: "idempotency_key_missing", constant: problem.CodeIdempotencyKeyMissing, status: 400,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides", map[string]string{"Authorization": "Bearer " + b.Rider.Token}, testBody)
		}},
	{code: "idempotency_key_reused", constant: problem.CodeIdempotencyKeyReused, status: 422,
		provoke: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`)
		}},
	{code: "internal_error", constant: problem.CodeInternalError, status: 500, opts: setupOpts{simulateErrors: true},
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
		}},
	{code: "invalid_parameter", constant: problem.CodeInvalidParameter, status: 400,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 91, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`)
		}},
	{code: "method_not_allowed", constant: problem.CodeMethodNotAllowed, status: 405,
		provoke: func(t *testing.T, b *testBundle) *response { return b.do(t, http.MethodDelete, "/rides", nil, "") }},
	{code: "not_found", constant: problem.CodeNotFound, status: 404,
		provoke: func(t *testing.T, b *testBundle) *response { return b.do(t, http.MethodGet, "/nowhere", nil, "") }},
	// Stripe saves the 500 under the key; the retry gets it replayed, which no retry can settle.
	{code: "payment_needs_review", constant: problem.CodePaymentNeedsReview, status: 500,
		provoke: func(t *testing.T, b *testBundle) *response {
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500Saved, 1)
			b.postRide(t, b.Rider, testKey, testBody)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
	{code: "payment_processor_unavailable", constant: problem.CodePaymentProcessorUnavailable, status: 503,
		provoke: func(t *testing.T, b *testBundle) *response {
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
	{code: "payment_rejected", constant: problem.CodePaymentRejected, status: 402,
		provoke: func(t *testing.T, b *testBundle) *response {
			b.Exec(t, `UPDATE users SET stripe_customer_id = 'cus_NotAtStripe42' WHERE id = $1`, b.Rider.ID)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
	{code: "booking_rate_limited", constant: problem.CodeBookingRateLimited, status: 429, opts: setupOpts{limits: &api.Limits{RiderRideBurst: 1, RiderRidesPerMinute: 1}},
		provoke: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return b.postRide(t, b.Rider, testKey+"-2", testBody)
		}},
	{code: "cancel_rate_limited", constant: problem.CodeCancelRateLimited, status: 429, opts: setupOpts{limits: &api.Limits{RiderCancelBurst: 1, RiderCancelsPerMinute: 1}},
		provoke: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireStatus(t, http.StatusOK)
			return b.cancelRide(t, b.Rider, cancelKey+"-2", ride.ID)
		}},
	{code: "request_rate_limited", constant: problem.CodeRequestRateLimited, status: 429, opts: setupOpts{limits: &api.Limits{RiderRequestBurst: 1, RiderRequestsPerMinute: 1}},
		provoke: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
	{code: "read_rate_limited", constant: problem.CodeReadRateLimited, status: 429, opts: setupOpts{limits: &api.Limits{RiderReadBurst: 1, RiderReadsPerMinute: 1}},
		provoke: func(t *testing.T, b *testBundle) *response {
			b.getRide(t, b.Rider, 1)
			return b.getRide(t, b.Rider, 1)
		}},
	// The database aborting a request's transaction for the whole retry budget.
	{code: "request_conflict", constant: problem.CodeRequestConflict, status: 409},
	{code: "request_too_large", constant: problem.CodeRequestTooLarge, status: 413,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "pad": "`+strings.Repeat("x", 64<<10)+`"}`)
		}},
	{code: "ride_already_cancelled", constant: problem.CodeRideAlreadyCancelled, status: 409,
		provoke: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireStatus(t, 200)
			return b.cancelRide(t, b.Rider, cancelKey+"-2", ride.ID)
		}},
	{code: "ride_already_refunded", constant: problem.CodeRideAlreadyRefunded, status: 409,
		provoke: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			if _, err := b.Stripe.RefundCharge(*ride.StripeChargeID); err != nil {
				t.Fatal(err)
			}
			return b.cancelRide(t, b.Rider, cancelKey, ride.ID)
		}},
	{code: "ride_disputed", constant: problem.CodeRideDisputed, status: 409,
		provoke: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			if _, err := b.Stripe.DisputeCharge(*ride.StripeChargeID); err != nil {
				t.Fatal(err)
			}
			return b.cancelRide(t, b.Rider, cancelKey, ride.ID)
		}},
	{code: "ride_not_charged", constant: problem.CodeRideNotCharged, status: 409,
		provoke: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.DecliningRider, testKey, testBody).requireProblem(t, 402, problem.CodeCardDeclined)
			return b.cancelRide(t, b.DecliningRider, cancelKey, b.onlyRide(t, b.DecliningRider.ID))
		}},
	{code: "service_unavailable", constant: problem.CodeServiceUnavailable, status: 503,
		provoke: func(t *testing.T, b *testBundle) *response {
			b.Pool.Close()
			return b.do(t, http.MethodGet, "/readyz", nil, "")
		}},
	{code: "unauthorized", constant: problem.CodeUnauthorized, status: 401,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides", map[string]string{"Idempotency-Key": testKey}, testBody)
		}},
	{code: "unsupported_media_type", constant: problem.CodeUnsupportedMediaType, status: 415,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides", map[string]string{
				"Authorization": "Bearer " + b.Rider.Token, "Idempotency-Key": testKey, "Content-Type": "text/plain"}, testBody)
		}},
	{code: "webhook_event_invalid", constant: problem.CodeWebhookEventInvalid, status: 400,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.postEvent(t, stripeEvent("evt_1", "charge.dispute.created", `{"id":"dp_1","object":"dispute"}`), testWebhookSecret, time.Now())
		}},
	{code: "webhook_signature_invalid", constant: problem.CodeWebhookSignatureInvalid, status: 400,
		provoke: func(t *testing.T, b *testBundle) *response {
			return b.postEvent(t, stripeEvent("evt_1", "charge.refunded", refundedCharge("ch_1", true)), "whsec_wrong", time.Now())
		}},
}

// TestProblemCodesArePinned holds each stable problem code to its spelling and status three
// ways: the constant the API uses says it, a real request gets it (where one cheaply does), and
// internal/problem declares no code that is not pinned here.
func TestProblemCodesArePinned(t *testing.T) {
	t.Parallel()

	var pinned []string
	for _, pc := range pinnedCodes {
		pinned = append(pinned, pc.code)
	}
	declared := declaredProblemCodes(t)
	slices.Sort(pinned)
	if !slices.Equal(pinned, declared) {
		t.Errorf("want internal/problem to declare exactly the pinned codes\n pinned:   %q\n declared: %q", pinned, declared)
	}

	for _, pc := range pinnedCodes {
		t.Run(pc.code, func(t *testing.T) {
			t.Parallel()
			if string(pc.constant) != pc.code {
				t.Fatalf("want the constant spelled %q, got %q", pc.code, pc.constant)
			}
			if pc.provoke == nil {
				return
			}
			resp := pc.provoke(t, setup(t, pc.opts))
			if resp.status != pc.status {
				t.Fatalf("want %d, got %d: %s", pc.status, resp.status, resp.body)
			}
			if got := string(resp.problem(t).Code); got != pc.code {
				t.Fatalf("want code %q, got %q", pc.code, got)
			}
		})
	}
}

// declaredProblemCodes reads the values of the Code constants that internal/problem declares,
// from its source, sorted.
func declaredProblemCodes(t *testing.T) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "../internal/problem/problem.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("want every Code constant a string literal, got %T", v)
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, s)
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal("found no Code constants in internal/problem/problem.go")
	}
	slices.Sort(codes)
	return codes
}
