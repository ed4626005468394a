package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// madeUpRequestID is the shape of an id the API makes: "req_" and 128 random bits in base32.
var madeUpRequestID = regexp.MustCompile(`^req_[A-Z2-7]{26}$`)

func TestRequestID(t *testing.T) {
	t.Parallel()

	t.Run("EchoesAValidID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, id := range []string{
			"f47ac10b-58cc-4372-a567-0e02b2c3d479",
			"01HZX3Q5R8Y2V6T9N4M7K1J0CD",
			"lb.1:abc_DEF-9",
			strings.Repeat("a", 64),
		} {
			resp := b.do(t, http.MethodGet, "/healthz", map[string]string{"X-Request-Id": id}, "")
			if got := resp.header.Get("X-Request-Id"); got != id {
				t.Fatalf("want %q echoed, got %q", id, got)
			}
		}
	})

	t.Run("MakesOneWhenMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		one := b.do(t, http.MethodGet, "/healthz", nil, "").header.Get("X-Request-Id")
		two := b.do(t, http.MethodGet, "/healthz", nil, "").header.Get("X-Request-Id")
		if !madeUpRequestID.MatchString(one) || !madeUpRequestID.MatchString(two) || one == two {
			t.Fatalf("want two different made-up ids, got %q and %q", one, two)
		}
	})

	t.Run("ReplacesAnInvalidOrLongID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, id := range []string{
			strings.Repeat("a", 65),
			"two words",
			`quote"d`,
			"key=value",
			"semi;colon",
			"caf\u00e9",
			"req_FROMTHECLIENTNOTTHEAPI0", // would pass for one the API made
		} {
			resp := b.do(t, http.MethodGet, "/healthz", map[string]string{"X-Request-Id": id}, "")
			if got := resp.header.Get("X-Request-Id"); !madeUpRequestID.MatchString(got) || got == id {
				t.Fatalf("want %q replaced by a made-up id, got %q", id, got)
			}
		}
	})

	t.Run("InEveryProblemBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		auth := "Bearer " + b.Rider.Token
		tests := []struct {
			name    string
			method  string
			path    string
			headers map[string]string
			body    string
			status  int
			code    problem.Code
		}{
			{"NotFound", http.MethodGet, "/nowhere", nil, "", 404, problem.CodeNotFound},
			{"MethodNotAllowed", http.MethodDelete, "/healthz", nil, "", 405, "method_not_allowed"},
			{"Unauthorized", http.MethodPost, "/rides", nil, testBody, 401, problem.CodeUnauthorized},
			{"NoKey", http.MethodPost, "/rides", map[string]string{"Authorization": auth}, testBody, 400, problem.CodeIdempotencyKeyMissing},
			{"TooLarge", http.MethodPost, "/rides", map[string]string{"Authorization": auth, "Idempotency-Key": testKey, "Content-Type": "application/json"},
				strings.Repeat(" ", 64<<10+1), 413, problem.CodeRequestTooLarge},
		}
		for _, tt := range tests {
			headers := map[string]string{"X-Request-Id": "client-" + tt.name}
			for k, v := range tt.headers {
				headers[k] = v
			}
			p := b.do(t, tt.method, tt.path, headers, tt.body).requireProblem(t, tt.status, tt.code)
			if p.RequestID != "client-"+tt.name {
				t.Fatalf("%s: want the client's id in the body, got %q", tt.name, p.RequestID)
			}
		}
	})

	t.Run("AReplayedProblemCarriesTheReplaysID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		post := func(id string) *response {
			return b.do(t, http.MethodPost, "/rides", map[string]string{
				"Authorization":   "Bearer " + b.DecliningRider.Token,
				"Idempotency-Key": testKey,
				"Content-Type":    "application/json",
				"X-Request-Id":    id,
			}, testBody)
		}
		first := post("first-attempt").requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)
		replay := post("second-attempt")
		replayed := replay.requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)
		if first.RequestID != "first-attempt" || replayed.RequestID != "second-attempt" || replay.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("want each answer to carry its own request's id, got %q then %q (replayed %q)",
				first.RequestID, replayed.RequestID, replay.header.Get("Idempotent-Replayed"))
		}
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys WHERE response_body ? 'request_id'`); n != 0 {
			t.Fatal("want no request id stored with the response")
		}
	})

	t.Run("InEveryLogLineOfTheRequestWithStripesOwn", func(t *testing.T) {
		t.Parallel()
		stripeIDs := &requestIDRecorder{next: &http.Transport{}}
		b := setup(t, setupOpts{stripeTransport: stripeIDs})

		resp := b.do(t, http.MethodPost, "/rides", map[string]string{
			"Authorization":   "Bearer " + b.Rider.Token,
			"Idempotency-Key": testKey,
			"Content-Type":    "application/json",
			"X-Request-Id":    "ride-request-1",
		}, testBody)
		body := resp.rideCreated(t)

		lines := b.logs.lines(t)
		if len(lines) < 2 {
			t.Fatalf("want the access line and the Stripe call's line at least, got %v", lines)
		}
		for _, line := range lines {
			if line["request_id"] != "ride-request-1" {
				t.Fatalf("want every line of the request to carry its id, got %v", line)
			}
		}
		b.logs.requireLine(t, "API: request")

		ids := stripeIDs.ids()
		stripeLine := b.logs.requireLine(t, "Phases: charge sent to Stripe")
		if len(ids) != 1 || !strings.HasPrefix(ids[0], "req_") || stripeLine["stripe_request_id"] != ids[0] ||
			stripeLine["outcome"] != "charged" || stripeLine["stripe_charge_id"] != *body.Ride.StripeChargeID {
			t.Fatalf("want the charge logged with Stripe's Request-Id %v, got %v", ids, stripeLine)
		}
	})

	t.Run("StripesIDOfARefusedCharge", func(t *testing.T) {
		t.Parallel()
		stripeIDs := &requestIDRecorder{next: &http.Transport{}}
		b := setup(t, setupOpts{stripeTransport: stripeIDs})
		b.postRide(t, b.DecliningRider, testKey, testBody).requireProblem(t, http.StatusPaymentRequired, problem.CodeCardDeclined)

		ids := stripeIDs.ids()
		line := b.logs.requireLine(t, "Phases: charge sent to Stripe")
		if len(ids) != 1 || line["stripe_request_id"] != ids[0] || line["outcome"] != string(problem.CodeCardDeclined) || line["stripe_status"] != 402.0 {
			t.Fatalf("want the refusal logged with Stripe's Request-Id %v, got %v", ids, line)
		}
	})
}

// requestIDRecorder is a Stripe transport that notes the Request-Id of each of Stripe's answers.
type requestIDRecorder struct {
	next http.RoundTripper

	mu        sync.Mutex
	requestID []string
}

func (r *requestIDRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.requestID = append(r.requestID, resp.Header.Get("Request-Id"))
		r.mu.Unlock()
	}
	return resp, err
}

func (r *requestIDRecorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requestID...)
}
