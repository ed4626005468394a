package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// TestOpenAPIDocument checks the contract itself: that the server serves it as it was built, and
// that it lists every route the router has and every problem code the API has.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()

	t.Run("ServedAsBuilt", func(t *testing.T) {
		t.Parallel()
		apiMetrics := metrics.NewAPI(prometheus.NewRegistry())
		server := httptest.NewServer(api.NewServer(nil, nil, slog.New(slog.DiscardHandler), api.Config{Metrics: apiMetrics}).Handler())
		t.Cleanup(server.Close)

		resp := doRequest(t, server, http.MethodGet, "/openapi.yaml", http.Header{}, "")
		want, err := os.ReadFile(contractFile)
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "application/yaml" || !bytes.Equal(resp.body, want) {
			t.Fatalf("want 200 application/yaml with api/%s, got %d %q, %d bytes", contractFile,
				resp.status, resp.header.Get("Content-Type"), len(resp.body))
		}
		if _, err := parseContract(resp.body); err != nil {
			t.Fatalf("want the served document to load as OpenAPI 3.1: %s", err)
		}
		// One series for the document, under its own route.
		if n := testutil.ToFloat64(apiMetrics.HTTPRequests.WithLabelValues("/openapi.yaml", "200")); n != 1 {
			t.Fatalf("want the request counted under route /openapi.yaml, got %v", n)
		}
	})

	t.Run("DescribesEveryRoute", func(t *testing.T) {
		t.Parallel()
		routes := api.NewServer(nil, nil, slog.New(slog.DiscardHandler), api.Config{StripeWebhookSecret: testWebhookSecret}).Handler().(chi.Routes)
		var routed []string
		err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			routed = append(routed, method+" "+route)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var described []string
		for path, item := range contract(t).doc.Paths.Map() {
			for method := range item.Operations() {
				described = append(described, method+" "+path)
			}
		}
		slices.Sort(routed)
		slices.Sort(described)
		if !slices.Equal(routed, described) {
			t.Fatalf("want the contract to describe every route the router has and no other,\nrouter:   %v\ncontract: %v",
				routed, described)
		}
	})

	t.Run("DescribesEveryProblemCode", func(t *testing.T) {
		t.Parallel()
		codes := declaredProblemCodes(t)
		c := contract(t)
		enum := c.doc.Components.Schemas["ProblemCode"].Value.Enum
		var described []string
		for _, v := range enum {
			described = append(described, v.(string))
		}
		slices.Sort(described)
		if !slices.Equal(codes, described) {
			t.Fatalf("want ProblemCode to list every code of internal/problem,\nproblem:  %v\ncontract: %v", codes, described)
		}

		// And each code is one that some response may carry, with its status: a response of an
		// operation, or NotFound and MethodNotAllowed, which answer requests that reach none.
		answered := map[string]bool{}
		for _, a := range c.answers() {
			answered[a.code] = true
		}
		for _, ref := range c.doc.Components.Responses {
			for _, code := range responseCodes(ref.Value) {
				answered[code] = true
			}
		}
		for _, code := range codes {
			if !answered[code] {
				t.Errorf("no response of the contract carries %s", code)
			}
		}
	})
}

// contractAnswer is one answer the contract allows: an operation, a status and, for a problem,
// its code. It is written as "POST /rides 402 card_declined".
type contractAnswer struct {
	method, path string
	status       int
	code         string // empty for an answer that is not a problem
}

func (a contractAnswer) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %d %s", a.method, a.path, a.status, a.code))
}

// answers lists every answer the contract allows, one per problem code of each status.
func (c *openAPIContract) answers() []contractAnswer {
	var answers []contractAnswer
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				n, _ := strconv.Atoi(status)
				codes := responseCodes(ref.Value)
				if len(codes) == 0 {
					codes = []string{""}
				}
				for _, code := range codes {
					answers = append(answers, contractAnswer{method, path, n, code})
				}
			}
		}
	}
	return answers
}

// responseCodes is the problem codes a response may carry: its schema's code enum or const.
func responseCodes(resp *openapi3.Response) []string {
	mt := resp.Content.Get(problem.ContentType)
	if mt == nil || mt.Schema == nil || mt.Schema.Value.Properties["code"] == nil {
		return nil
	}
	code := mt.Schema.Value.Properties["code"].Value
	var codes []string
	if code.Const != nil {
		codes = append(codes, code.Const.(string))
	}
	for _, v := range code.Enum {
		codes = append(codes, v.(string))
	}
	return codes
}

// untestedAnswers are answers of the contract that TestContractAnswers cannot provoke, each with
// the reason.
var untestedAnswers = map[string]string{
	"POST /rides 409 request_conflict": "needs the database to abort one request's transaction " +
		"for its whole 2 s retry budget; phases' tests cover ErrConflict, errors.go maps it, and " +
		"409 is tested with idempotency_key_in_use",
	"GET /healthz 500 internal_error":      "only a panic, which recoverPanics answers on every route",
	"GET /readyz 500 internal_error":       "only a panic, which recoverPanics answers on every route",
	"GET /openapi.yaml 500 internal_error": "only a panic, which recoverPanics answers on every route",
}

// contractCase provokes one answer of the contract.
type contractCase struct {
	answer contractAnswer
	opts   setupOpts
	send   func(t *testing.T, b *testBundle) *response
}

// TestContractAnswers provokes every answer the contract lists, each status of each operation
// with each of its problem codes, and checks that the API gives it. doRequest validates each
// response against the contract, so a response that departs from it fails here, whichever
// other test also covers the behaviour.
func TestContractAnswers(t *testing.T) {
	t.Parallel()

	const noCharge = `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`
	rideHeaders := func(rider string, key string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + rider, "Idempotency-Key": key, "Content-Type": "application/json"}
	}
	getRide := func(t *testing.T, b *testBundle, id string) *response {
		return b.do(t, http.MethodGet, "/rides/"+id, map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "")
	}
	listRides := func(t *testing.T, b *testBundle, query string) *response {
		return b.do(t, http.MethodGet, "/rides"+query, map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "")
	}
	oneRidePerMinute := &api.Limits{RiderRidesPerMinute: 1, RiderRideBurst: 1}
	oneCancelPerMinute := &api.Limits{RiderCancelsPerMinute: 1, RiderCancelBurst: 1}
	oneRequestPerMinute := &api.Limits{RiderRequestsPerMinute: 1, RiderRequestBurst: 1}
	oneReadPerMinute := &api.Limits{RiderReadsPerMinute: 1, RiderReadBurst: 1}
	// One slot, held by a request that waits at a lock as long as the test needs (see whileShedding).
	shedding := setupOpts{limits: &api.Limits{MaxRequestsInFlight: 1}, lockWait: heldAtLock}

	post := func(status int, code problem.Code) contractAnswer {
		return contractAnswer{http.MethodPost, "/rides", status, string(code)}
	}
	get := func(path string, status int, code problem.Code) contractAnswer {
		return contractAnswer{http.MethodGet, path, status, string(code)}
	}
	cancel := func(status int, code problem.Code) contractAnswer {
		return contractAnswer{http.MethodPost, "/rides/{id}/cancel", status, string(code)}
	}
	webhook := func(status int, code problem.Code) contractAnswer {
		return contractAnswer{http.MethodPost, "/webhooks/stripe", status, string(code)}
	}

	cases := []contractCase{
		{answer: post(201, ""), send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			replay := b.postRide(t, b.Rider, testKey, testBody)
			if replay.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("want the 201 replayed, got %v", replay.header)
			}
			return replay
		}},
		{answer: post(400, problem.CodeIdempotencyKeyMissing), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides", rideHeaders(b.Rider.Token, ""), testBody)
		}},
		{answer: post(400, problem.CodeIdempotencyKeyInvalid), send: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, "too-short", testBody)
		}},
		{answer: post(400, problem.CodeDuplicateHeader), send: func(t *testing.T, b *testBundle) *response {
			header := http.Header{"Authorization": {"Bearer " + b.Rider.Token}, "Content-Type": {"application/json"},
				"Idempotency-Key": {testKey, testKey}}
			return b.doHeader(t, http.MethodPost, "/rides", header, testBody)
		}},
		{answer: post(400, problem.CodeInvalidParameter), send: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 91, "origin_lon": 0, "target_lat": 0, "target_lon": 0}`)
		}},
		{answer: post(401, problem.CodeUnauthorized), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides", rideHeaders("rr_not_a_token", testKey), testBody)
		}},
		{answer: post(402, problem.CodeCardDeclined), send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.DecliningRider, testKey, testBody).requireProblem(t, 402, problem.CodeCardDeclined)
			return b.postRide(t, b.DecliningRider, testKey, testBody) // replayed
		}},
		{answer: post(402, problem.CodePaymentRejected), send: func(t *testing.T, b *testBundle) *response {
			b.Exec(t, `UPDATE users SET stripe_customer_id = 'cus_NotAtStripe42' WHERE id = $1`, b.Rider.ID)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
		{answer: post(409, problem.CodeIdempotencyKeyInUse), opts: setupOpts{simulateErrors: true}, send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
			b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '30 seconds', locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1`)
			return b.postRide(t, b.Rider, testKey, noCharge)
		}},
		{answer: post(413, problem.CodeRequestTooLarge), send: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, testKey, testBody+strings.Repeat(" ", 64<<10))
		}},
		{answer: post(415, problem.CodeUnsupportedMediaType), send: func(t *testing.T, b *testBundle) *response {
			headers := rideHeaders(b.Rider.Token, testKey)
			headers["Content-Type"] = "text/plain"
			return b.do(t, http.MethodPost, "/rides", headers, testBody)
		}},
		{answer: post(422, problem.CodeIdempotencyKeyReused), send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return b.postRide(t, b.Rider, testKey, noCharge)
		}},
		{answer: post(429, problem.CodeBookingRateLimited), opts: setupOpts{limits: oneRidePerMinute}, send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return b.postRide(t, b.Rider, "0ccb7813-second-key-0123456789", testBody)
		}},
		{answer: post(429, problem.CodeRequestRateLimited), opts: setupOpts{limits: oneRequestPerMinute}, send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
		{answer: post(500, problem.CodeInternalError), opts: setupOpts{simulateErrors: true}, send: func(t *testing.T, b *testBundle) *response {
			return b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
		}},
		{answer: post(500, problem.CodePaymentNeedsReview), send: func(t *testing.T, b *testBundle) *response {
			// Stripe saves its 500 under the key and replays it: no retry can settle the charge.
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500Saved, 1)
			b.postRide(t, b.Rider, testKey, testBody).requireProblem(t, 503, problem.CodePaymentProcessorUnavailable)
			b.postRide(t, b.Rider, testKey, testBody).requireProblem(t, 500, problem.CodePaymentNeedsReview)
			return b.postRide(t, b.Rider, testKey, testBody) // replayed
		}},
		{answer: post(503, problem.CodePaymentProcessorUnavailable), send: func(t *testing.T, b *testBundle) *response {
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
			return b.postRide(t, b.Rider, testKey, testBody)
		}},
		{answer: post(503, problem.CodeServiceUnavailable), opts: shedding, send: func(t *testing.T, b *testBundle) *response {
			return b.whileShedding(t, func() *response { return b.postRide(t, b.Rider, "key-shed-0123456789abcd", testBody) })
		}},

		{answer: get("/rides/{id}", 200, ""), send: func(t *testing.T, b *testBundle) *response {
			created := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return getRide(t, b, strconv.FormatInt(created.Ride.ID, 10))
		}},
		{answer: get("/rides/{id}", 400, problem.CodeDuplicateHeader), send: func(t *testing.T, b *testBundle) *response {
			header := http.Header{"Authorization": {"Bearer " + b.Rider.Token, "Bearer " + b.Rider.Token}}
			return b.doHeader(t, http.MethodGet, "/rides/1", header, "")
		}},
		{answer: get("/rides/{id}", 401, problem.CodeUnauthorized), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodGet, "/rides/1", nil, "")
		}},
		{answer: get("/rides/{id}", 404, problem.CodeNotFound), send: func(t *testing.T, b *testBundle) *response {
			return getRide(t, b, "1")
		}},
		{answer: get("/rides/{id}", 429, problem.CodeReadRateLimited), opts: setupOpts{limits: oneReadPerMinute}, send: func(t *testing.T, b *testBundle) *response {
			auth := map[string]string{"Authorization": "Bearer " + b.Rider.Token}
			b.do(t, http.MethodGet, "/rides/1", auth, "")
			return b.do(t, http.MethodGet, "/rides/1", auth, "")
		}},
		{answer: get("/rides/{id}", 500, problem.CodeInternalError), send: func(t *testing.T, b *testBundle) *response {
			// A database error that is not an outage: the table is gone from this test's database.
			b.Exec(t, `ALTER TABLE rides RENAME TO rides_gone`)
			return getRide(t, b, "1")
		}},
		{answer: get("/rides/{id}", 503, problem.CodeServiceUnavailable), opts: shedding, send: func(t *testing.T, b *testBundle) *response {
			return b.whileShedding(t, func() *response { return getRide(t, b, "1") })
		}},

		{answer: get("/rides", 200, ""), send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.Rider, testKey, testBody).rideCreated(t)
			return listRides(t, b, "")
		}},
		{answer: get("/rides", 400, problem.CodeInvalidParameter), send: func(t *testing.T, b *testBundle) *response {
			return listRides(t, b, "?limit=101")
		}},
		{answer: get("/rides", 400, problem.CodeDuplicateHeader), send: func(t *testing.T, b *testBundle) *response {
			header := http.Header{"Authorization": {"Bearer " + b.Rider.Token, "Bearer " + b.Rider.Token}}
			return b.doHeader(t, http.MethodGet, "/rides", header, "")
		}},
		{answer: get("/rides", 401, problem.CodeUnauthorized), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodGet, "/rides", nil, "")
		}},
		{answer: get("/rides", 429, problem.CodeReadRateLimited), opts: setupOpts{limits: oneReadPerMinute}, send: func(t *testing.T, b *testBundle) *response {
			auth := map[string]string{"Authorization": "Bearer " + b.Rider.Token}
			b.do(t, http.MethodGet, "/rides", auth, "")
			return b.do(t, http.MethodGet, "/rides", auth, "")
		}},
		{answer: get("/rides", 500, problem.CodeInternalError), send: func(t *testing.T, b *testBundle) *response {
			b.Exec(t, `ALTER TABLE rides RENAME TO rides_gone`)
			return listRides(t, b, "")
		}},
		{answer: get("/rides", 503, problem.CodeServiceUnavailable), opts: shedding, send: func(t *testing.T, b *testBundle) *response {
			return b.whileShedding(t, func() *response { return listRides(t, b, "") })
		}},

		{answer: cancel(200, ""), send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireStatus(t, 200)
			replay := b.cancelRide(t, b.Rider, cancelKey, ride.ID)
			if replay.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("want the 200 replayed, got %v", replay.header)
			}
			return replay
		}},
		{answer: cancel(400, problem.CodeIdempotencyKeyMissing), send: func(t *testing.T, b *testBundle) *response {
			return b.cancelRide(t, b.Rider, "", 1)
		}},
		{answer: cancel(400, problem.CodeIdempotencyKeyInvalid), send: func(t *testing.T, b *testBundle) *response {
			return b.cancelRide(t, b.Rider, "too-short", 1)
		}},
		{answer: cancel(400, problem.CodeDuplicateHeader), send: func(t *testing.T, b *testBundle) *response {
			header := http.Header{"Authorization": {"Bearer " + b.Rider.Token}, "Idempotency-Key": {cancelKey, cancelKey}}
			return b.doHeader(t, http.MethodPost, "/rides/1/cancel", header, "")
		}},
		{answer: cancel(400, problem.CodeInvalidParameter), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides/1/cancel", rideHeaders(b.Rider.Token, cancelKey), `{"reason": "changed my mind"}`)
		}},
		{answer: cancel(401, problem.CodeUnauthorized), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides/1/cancel", map[string]string{"Idempotency-Key": cancelKey}, "")
		}},
		{answer: cancel(404, problem.CodeNotFound), send: func(t *testing.T, b *testBundle) *response {
			b.cancelRide(t, b.Rider, cancelKey, 1).requireProblem(t, 404, problem.CodeNotFound)
			return b.cancelRide(t, b.Rider, cancelKey, 1) // replayed
		}},
		{answer: cancel(409, problem.CodeRideAlreadyCancelled), send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireStatus(t, 200)
			return b.cancelRide(t, b.Rider, cancelKey+"-2", ride.ID)
		}},
		{answer: cancel(409, problem.CodeRideAlreadyRefunded), send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			if _, err := b.Stripe.RefundCharge(*ride.StripeChargeID); err != nil {
				t.Fatal(err)
			}
			return b.cancelRide(t, b.Rider, cancelKey, ride.ID)
		}},
		{answer: cancel(409, problem.CodeRideDisputed), send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			if _, err := b.Stripe.DisputeCharge(*ride.StripeChargeID); err != nil {
				t.Fatal(err)
			}
			return b.cancelRide(t, b.Rider, cancelKey, ride.ID)
		}},
		{answer: cancel(409, problem.CodeRideNotCharged), send: func(t *testing.T, b *testBundle) *response {
			b.postRide(t, b.DecliningRider, testKey, testBody).requireProblem(t, 402, problem.CodeCardDeclined)
			return b.cancelRide(t, b.DecliningRider, cancelKey, b.onlyRide(t, b.DecliningRider.ID))
		}},
		{answer: cancel(409, problem.CodeIdempotencyKeyInUse), send: func(t *testing.T, b *testBundle) *response {
			b.cancelRide(t, b.Rider, cancelKey, 1).requireProblem(t, 404, problem.CodeNotFound)
			b.Exec(t, `UPDATE idempotency_keys SET recovery_point = 'started', response_code = NULL, response_body = NULL,
				locked_at = now(), locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1`)
			return b.cancelRide(t, b.Rider, cancelKey, 1)
		}},
		{answer: cancel(409, problem.CodeRequestConflict), opts: setupOpts{simulateErrors: true}, send: func(t *testing.T, b *testBundle) *response {
			// The ride is still being booked: its request stopped before the charge.
			b.postRide(t, b.Rider, testKey, `{"origin_lat": 0, "origin_lon": 0, "target_lat": 0, "target_lon": 0, "raise_error": true}`)
			resp := b.cancelRide(t, b.Rider, cancelKey, b.onlyRide(t, b.Rider.ID))
			if resp.header.Get("Retry-After") == "" {
				t.Errorf("want a Retry-After on a cancel to retry, got %v", resp.header)
			}
			return resp
		}},
		{answer: cancel(413, problem.CodeRequestTooLarge), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/rides/1/cancel", rideHeaders(b.Rider.Token, cancelKey), strings.Repeat(" ", 65<<10))
		}},
		{answer: cancel(415, problem.CodeUnsupportedMediaType), send: func(t *testing.T, b *testBundle) *response {
			headers := rideHeaders(b.Rider.Token, cancelKey)
			headers["Content-Type"] = "text/plain"
			return b.do(t, http.MethodPost, "/rides/1/cancel", headers, "please")
		}},
		{answer: cancel(422, problem.CodeIdempotencyKeyReused), send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			return b.cancelRide(t, b.Rider, testKey, ride.ID)
		}},
		{answer: cancel(429, problem.CodeCancelRateLimited), opts: setupOpts{limits: oneCancelPerMinute}, send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireStatus(t, http.StatusOK)
			return b.cancelRide(t, b.Rider, cancelKey+"-2", ride.ID)
		}},
		{answer: cancel(429, problem.CodeRequestRateLimited), opts: setupOpts{limits: oneRequestPerMinute}, send: func(t *testing.T, b *testBundle) *response {
			b.cancelRide(t, b.Rider, cancelKey, 1).requireStatus(t, http.StatusNotFound)
			return b.cancelRide(t, b.Rider, cancelKey, 1)
		}},
		{answer: cancel(500, problem.CodeInternalError), send: func(t *testing.T, b *testBundle) *response {
			b.Exec(t, `ALTER TABLE rides RENAME TO rides_gone`)
			return b.cancelRide(t, b.Rider, cancelKey, 1)
		}},
		{answer: cancel(500, problem.CodePaymentNeedsReview), send: func(t *testing.T, b *testBundle) *response {
			// Stripe already holds our cancel's idempotency key, for a refund of another charge:
			// it refuses the key, and no retry can tell whether this ride was refunded.
			other := b.postRide(t, b.Rider, testKey+"-other", testBody).rideCreated(t).Ride
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			refund := &stripe.RefundParams{Charge: other.StripeChargeID}
			refund.SetIdempotencyKey(b.stripeKeyOf(t, b.Rider.ID, cancelKey))
			if _, err := b.StripeClient.Refunds.New(refund); err != nil {
				t.Fatal(err)
			}
			b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireProblem(t, 500, problem.CodePaymentNeedsReview)
			return b.cancelRide(t, b.Rider, cancelKey, ride.ID) // replayed
		}},
		{answer: cancel(503, problem.CodePaymentProcessorUnavailable), opts: setupOpts{stripeTransport: failRefunds{}}, send: func(t *testing.T, b *testBundle) *response {
			ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
			return b.cancelRide(t, b.Rider, cancelKey, ride.ID)
		}},
		{answer: cancel(503, problem.CodeServiceUnavailable), opts: shedding, send: func(t *testing.T, b *testBundle) *response {
			return b.whileShedding(t, func() *response { return b.cancelRide(t, b.Rider, cancelKey, 1) })
		}},

		{answer: webhook(200, ""), send: func(t *testing.T, b *testBundle) *response {
			return b.postEvent(t, stripeEvent("evt_contract", "charge.succeeded", refundedCharge("ch_x", false)), testWebhookSecret, time.Now())
		}},
		{answer: webhook(400, problem.CodeWebhookSignatureInvalid), send: func(t *testing.T, b *testBundle) *response {
			return b.postEvent(t, stripeEvent("evt_contract", "charge.refunded", refundedCharge("ch_x", true)), "whsec_wrong", time.Now())
		}},
		{answer: webhook(400, problem.CodeWebhookEventInvalid), send: func(t *testing.T, b *testBundle) *response {
			return b.postEvent(t, stripeEvent("evt_contract", "charge.dispute.created", `{"id":"dp_x","object":"dispute"}`), testWebhookSecret, time.Now())
		}},
		{answer: webhook(400, problem.CodeInvalidParameter), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodPost, "/webhooks/stripe", map[string]string{"Stripe-Signature": "t=1,v1=00"},
				strings.Repeat(" ", 257<<10))
		}},
		{answer: webhook(404, problem.CodeNotFound), opts: setupOpts{webhooksOff: true}, send: func(t *testing.T, b *testBundle) *response {
			return b.postEvent(t, stripeEvent("evt_contract", "charge.refunded", refundedCharge("ch_x", true)), testWebhookSecret, time.Now())
		}},
		{answer: webhook(500, problem.CodeInternalError), send: func(t *testing.T, b *testBundle) *response {
			b.Exec(t, `ALTER TABLE stripe_events RENAME TO stripe_events_gone`)
			return b.postEvent(t, stripeEvent("evt_contract", "charge.refunded", refundedCharge("ch_x", true)), testWebhookSecret, time.Now())
		}},
		{answer: webhook(503, problem.CodeServiceUnavailable), opts: shedding, send: func(t *testing.T, b *testBundle) *response {
			return b.whileShedding(t, func() *response {
				return b.postEvent(t, stripeEvent("evt_contract", "charge.refunded", refundedCharge("ch_x", true)), testWebhookSecret, time.Now())
			})
		}},

		{answer: get("/healthz", 200, ""), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodGet, "/healthz", nil, "")
		}},
		{answer: get("/readyz", 200, ""), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodGet, "/readyz", nil, "")
		}},
		{answer: get("/readyz", 503, problem.CodeServiceUnavailable), send: func(t *testing.T, b *testBundle) *response {
			b.Pool.Close()
			return b.do(t, http.MethodGet, "/readyz", nil, "")
		}},
		{answer: get("/openapi.yaml", 200, ""), send: func(t *testing.T, b *testBundle) *response {
			return b.do(t, http.MethodGet, "/openapi.yaml", nil, "")
		}},
	}

	// Every operation lists the 405 its path answers to a method it does not take.
	for _, op := range []struct{ method, path, sent, other string }{
		{http.MethodGet, "/rides", "/rides", http.MethodDelete},
		{http.MethodPost, "/rides", "/rides", http.MethodPut},
		{http.MethodGet, "/rides/{id}", "/rides/1", http.MethodPatch},
		{http.MethodPost, "/rides/{id}/cancel", "/rides/1/cancel", http.MethodGet},
		{http.MethodPost, "/webhooks/stripe", "/webhooks/stripe", http.MethodGet},
		{http.MethodGet, "/healthz", "/healthz", http.MethodPost},
		{http.MethodGet, "/readyz", "/readyz", http.MethodPost},
		{http.MethodGet, "/openapi.yaml", "/openapi.yaml", http.MethodPost},
	} {
		cases = append(cases, contractCase{answer: contractAnswer{op.method, op.path, 405, string(problem.CodeMethodNotAllowed)},
			send: func(t *testing.T, b *testBundle) *response {
				return b.do(t, op.other, op.sent, map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "")
			}})
	}

	t.Run("CasesCoverTheContract", func(t *testing.T) {
		t.Parallel()
		tested := map[string]bool{}
		for _, c := range cases {
			tested[c.answer.String()] = true
		}
		untested := maps.Clone(untestedAnswers)
		for _, a := range contract(t).answers() {
			_, isUntested := untested[a.String()]
			if tested[a.String()] == isUntested {
				t.Errorf("%s: want it either provoked by a case or listed in untestedAnswers, not both", a)
			}
			delete(tested, a.String())
			delete(untested, a.String())
		}
		for answer := range maps.Keys(tested) {
			t.Errorf("%s: a case provokes an answer the contract does not list", answer)
		}
		for answer := range maps.Keys(untested) {
			t.Errorf("%s: listed in untestedAnswers, but not an answer of the contract", answer)
		}
	})

	for _, c := range cases {
		t.Run(testName(c.answer), func(t *testing.T) {
			t.Parallel()
			b := setup(t, c.opts)
			resp := c.send(t, b)
			if c.answer.code == "" {
				if resp.status != c.answer.status {
					t.Fatalf("want %d, got %d: %s", c.answer.status, resp.status, resp.body)
				}
				return
			}
			resp.requireProblem(t, c.answer.status, problem.Code(c.answer.code))
		})
	}
}

// testName is a CamelCase subtest name for an answer: PostRides402CardDeclined.
func testName(a contractAnswer) string {
	var b strings.Builder
	for _, word := range strings.FieldsFunc(a.String(), func(r rune) bool {
		return r == ' ' || r == '/' || r == '_' || r == '.' || r == '{' || r == '}'
	}) {
		b.WriteString(strings.ToUpper(word[:1]) + strings.ToLower(word[1:]))
	}
	return b.String()
}

// whileShedding sends a request while the API sheds load: with Limits.MaxRequestsInFlight 1, a
// ride request stuck on a locked table holds the only slot, for as long as setupOpts.lockWait
// (at the default 5 s, a loaded machine could free it before send). The health checks and the
// contract, which no limit applies to, are still answered.
func (b *testBundle) whileShedding(t *testing.T, send func() *response) *response {
	t.Helper()
	// The key's table, which the request reaches once it holds its slot (see shedLoad).
	unlock := b.lockTable(t, "idempotency_keys")
	stuck := make(chan *response, 1)
	go func() { stuck <- b.postRide(t, b.Rider, "key-stuck-0123456789abc", testBody) }()
	b.waitForLockWaiters(t, 1)

	resp := send()
	for _, path := range []string{"/healthz", "/openapi.yaml"} {
		if r := b.do(t, http.MethodGet, path, nil, ""); r.status != http.StatusOK {
			t.Fatalf("want %s answered while shedding, got %d: %s", path, r.status, r.body)
		}
	}
	unlock()
	if got := <-stuck; got.status != http.StatusCreated {
		t.Fatalf("want the request in flight booked once the table is free, got %d: %s", got.status, got.body)
	}
	return resp
}

// failRefunds is a Stripe transport that drops every refund before it reaches Stripe.
type failRefunds struct{}

func (failRefunds) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/v1/refunds" {
		return nil, errors.New("connection reset by peer (test)")
	}
	return http.DefaultTransport.RoundTrip(req)
}

// onlyRide is the id of a rider's one ride.
func (b *testBundle) onlyRide(t *testing.T, userID int64) int64 {
	t.Helper()
	var id int64
	if err := b.Pool.QueryRow(t.Context(), `SELECT id FROM rides WHERE user_id = $1`, userID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// stripeKeyOf is the Stripe idempotency key the API derives for a rider's client key.
func (b *testBundle) stripeKeyOf(t *testing.T, userID int64, clientKey string) string {
	t.Helper()
	secret, err := models.StripeKeySecretGet(t.Context(), b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return phases.StripeIdempotencyKey(secret, userID, clientKey)
}

// requireStatus checks a response's status.
func (r *response) requireStatus(t *testing.T, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("want %d, got %d: %s", status, r.status, r.body)
	}
}
