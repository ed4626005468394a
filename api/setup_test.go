package api_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/rocketrides/rocketrides/internal/requestid"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/phases/resource"
)

type testBundle struct {
	*ridetest.Bundle
	server *httptest.Server

	// logs is everything the API and the phases logged, at info level (LOG_LEVEL's default), as
	// JSON lines.
	logs *logBuffer
}

type setupOpts struct {
	simulateErrors bool

	// freshStripeConnections makes every Stripe call use a new connection. On a reused one,
	// Go's transport re-sends a request with an Idempotency-Key by itself when the connection
	// drops, which hides a drop from the code under test.
	freshStripeConnections bool

	// stripeTransport, if set, carries the Stripe client's calls.
	stripeTransport http.RoundTripper

	// limits are the API's limits. The zero value turns them off, since most tests send many
	// requests as one rider; the limits' own tests set them, and the process tests in cmd/api
	// run with the defaults.
	limits *api.Limits

	// limitsClockStopped stops the clock of the limits as the API starts: no budget refills.
	limitsClockStopped bool

	// trustedProxies are the API's trusted proxies (api.Config.TrustedProxies).
	trustedProxies []netip.Prefix

	// metrics, if set, receives the API's series.
	metrics *metrics.API

	// webhooksOff leaves the API without a webhook secret, which turns POST /webhooks/stripe off.
	webhooksOff bool

	// conflictRetryBudget, if set, replaces phases.ConflictRetryBudgetDefault, and the phase
	// timeout is twice it. A test of something else that sends one rider's requests at once sets
	// it past what a loaded machine can use up: the rider's new keys land on one index page,
	// whose serialization failures (documented in docs/performance.md) are retried meanwhile.
	conflictRetryBudget time.Duration

	// lockWait, if set, is how long a request held at a lock waits before it gives up with a
	// 503: a ride request's phase timeout and the API's own reads' timeout, 5 s each by default.
	// A test that holds a request at a lock while it sends others sets it past what a loaded
	// machine takes to send them; at the default, the held request can give up first.
	lockWait time.Duration

	// wrap, if set, wraps the API's handler, as cmd/api does with its traces.
	wrap func(http.Handler) http.Handler
}

// testWebhookSecret is the signing secret of the test API's webhook endpoint.
const testWebhookSecret = "whsec_test_rocketrides"

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	b := ridetest.Setup(t)
	sc := b.StripeClient
	switch {
	case opts.freshStripeConnections:
		sc = b.FreshConnStripeClient()
	case opts.stripeTransport != nil:
		sc = stripeclient.New(stripeclient.Config{APIKey: ridetest.StripeAPIKey, URL: b.Stripe.URL,
			Timeout: ridetest.StripeTimeout, Transport: opts.stripeTransport})
	}
	// The processes' own logger, so that the tests see the lines an operator would.
	logs := &logBuffer{}
	logger := slog.New(requestid.NewLogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	executor := phases.New(b.Pool, sc, logger, phases.Config{
		SimulateErrors:      opts.simulateErrors,
		ConflictRetryBudget: opts.conflictRetryBudget,
		PhaseTimeout:        cmp.Or(opts.lockWait, 2*opts.conflictRetryBudget),
	})
	limits := api.Limits{Off: true}
	if opts.limits != nil {
		limits = *opts.limits
	}
	secret := testWebhookSecret
	if opts.webhooksOff {
		secret = ""
	}
	s := api.NewServer(b.Pool, executor, logger, api.Config{Limits: limits, TokenKey: ridetest.TokenKey,
		TrustedProxies: opts.trustedProxies, StripeWebhookSecret: secret, Metrics: opts.metrics})
	if opts.lockWait != 0 {
		s.SetReadTimeout(opts.lockWait)
	}
	if opts.limitsClockStopped {
		s.StopLimitsClock(time.Now())
	}
	handler := s.Handler()
	if opts.wrap != nil {
		handler = opts.wrap(handler)
	}
	server := httptest.NewServer(handler)
	t.Cleanup(server.Close)
	return &testBundle{Bundle: b, server: server, logs: logs}
}

// logBuffer collects log output from concurrent requests.
type logBuffer struct {
	proctest.SyncBuffer
}

// Len is the number of bytes logged so far.
func (l *logBuffer) Len() int { return len(l.String()) }

// lines decodes the JSON lines logged so far.
func (l *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(l.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("error decoding log line %q: %s", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// requireLine returns the one line logged with msg, failing unless there is exactly one.
func (l *logBuffer) requireLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, line := range l.lines(t) {
		if line["msg"] == msg {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %q line, got %d in:\n%v", msg, len(found), l.lines(t))
	}
	return found[0]
}

const (
	testKey   = "0ccb7813-e63d-4377-93c5-476cb93038f3"
	cancelKey = "cancel-9f1d2e3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	testBody  = `{"origin_lat": 37.7749, "origin_lon": -122.4194, "target_lat": 37.3382, "target_lon": -121.8863}`
)

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes a problem+json body, checking its media type and its status field.
func (r *response) problem(t *testing.T) problem.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("want application/problem+json, got %q: %s", ct, r.body)
	}
	var p problem.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("error decoding problem %s: %s", r.body, err)
	}
	if p.Status != r.status || p.Type == "" || p.Title == "" || p.Detail == "" || p.Code == "" {
		t.Fatalf("incomplete problem document: %s", r.body)
	}
	if p.RequestID == "" || p.RequestID != r.header.Get("X-Request-Id") {
		t.Fatalf("want the problem's request_id to be the response's X-Request-Id %q, got %s",
			r.header.Get("X-Request-Id"), r.body)
	}
	return p
}

// requireProblem checks that a request was answered with status and code.
func (r *response) requireProblem(t *testing.T, status int, code problem.Code) problem.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("want %d, got %d: %s", status, r.status, r.body)
	}
	p := r.problem(t)
	if p.Code != code {
		t.Fatalf("want code %s, got %s", code, p.Code)
	}
	return p
}

// do sends a request with the given headers.
func (b *testBundle) do(t *testing.T, method, path string, headers map[string]string, body string) *response {
	t.Helper()
	header := http.Header{}
	for k, v := range headers {
		header.Set(k, v)
	}
	return b.doHeader(t, method, path, header, body)
}

// doHeader sends a request with header, which may give a header more than once.
func (b *testBundle) doHeader(t *testing.T, method, path string, header http.Header, body string) *response {
	t.Helper()
	return doRequest(t, b.server, method, path, header, body)
}

// doRequest sends a request to server, and checks the response against the API's OpenAPI
// document (see contract_test.go), so that every answer any test of the package gets holds
// the contract to the code; and that a JSON answer ends in a newline, replays included.
func doRequest(t *testing.T, server *httptest.Server, method, path string, header http.Header, body string) *response {
	t.Helper()
	req, err := http.NewRequest(method, server.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("want every response to carry an X-Request-Id, got none on %d %s", resp.StatusCode, respBody)
	}
	if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("want every response marked no-store and nosniff, got %q and %q on %d %s",
			resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"), resp.StatusCode, respBody)
	}
	if ct := resp.Header.Get("Content-Type"); method != http.MethodHead && (ct == "application/json" || ct == problem.ContentType) && !bytes.HasSuffix(respBody, []byte("}\n")) {
		t.Fatalf("want every JSON answer to end in one newline after its document, got %q on %d", respBody, resp.StatusCode)
	}
	contract(t).requireConforms(t, req, resp.StatusCode, resp.Header, respBody)
	return &response{status: resp.StatusCode, header: resp.Header, body: respBody}
}

// postRide sends a JSON ride request as rider with key.
func (b *testBundle) postRide(t *testing.T, rider *ridetest.Rider, key, body string) *response {
	t.Helper()
	return b.do(t, http.MethodPost, "/rides", map[string]string{
		"Authorization":   "Bearer " + rider.Token,
		"Idempotency-Key": key,
		"Content-Type":    "application/json",
	}, body)
}

// cancelRide sends a cancel of ride id as rider with key, with no body.
func (b *testBundle) cancelRide(t *testing.T, rider *ridetest.Rider, key string, id int64) *response {
	t.Helper()
	return b.do(t, http.MethodPost, "/rides/"+strconv.FormatInt(id, 10)+"/cancel", map[string]string{
		"Authorization":   "Bearer " + rider.Token,
		"Idempotency-Key": key,
	}, "")
}

// postEvent sends a Stripe event to the webhook, signed with secret at signedAt.
func (b *testBundle) postEvent(t *testing.T, event string, secret string, signedAt time.Time) *response {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: []byte(event), Secret: secret, Timestamp: signedAt})
	return b.do(t, http.MethodPost, "/webhooks/stripe", map[string]string{
		"Stripe-Signature": signed.Header,
		"Content-Type":     "application/json; charset=utf-8",
	}, event)
}

// stripeEvent is a Stripe Event of type about object, as Stripe sends it.
func stripeEvent(id, eventType, object string) string {
	return stripeEventOf(id, eventType, object, stripe.APIVersion, time.Now().Unix())
}

// stripeEventOf is stripeEvent from an account on apiVersion, created at created (Unix time).
func stripeEventOf(id, eventType, object, apiVersion string, created int64) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","api_version":%q,"created":%d,"livemode":false,`+
		`"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":%q,"data":{"object":%s}}`,
		id, apiVersion, created, eventType, object)
}

// refundedCharge and dispute are the objects of charge.refunded and charge.dispute.created.
func refundedCharge(chargeID string, full bool) string {
	refunded := int64(0)
	if full {
		refunded = phases.RideAmountCents
	}
	return fmt.Sprintf(`{"id":%q,"object":"charge","amount":%d,"amount_refunded":%d,"currency":"usd","refunded":%t,"status":"succeeded"}`,
		chargeID, phases.RideAmountCents, refunded, full)
}

func dispute(chargeID string) string {
	return fmt.Sprintf(`{"id":"dp_test","object":"dispute","amount":%d,"charge":%q,"currency":"usd","reason":"fraudulent","status":"needs_response"}`,
		phases.RideAmountCents, chargeID)
}

// rideStatus reads a ride's status.
func (b *testBundle) rideStatus(t *testing.T, id int64) string {
	t.Helper()
	var status string
	if err := b.Pool.QueryRow(t.Context(), `SELECT status FROM rides WHERE id = $1`, id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	return status
}

// requireNothingStored checks that rejected requests left no trace.
func (b *testBundle) requireNothingStored(t *testing.T) {
	t.Helper()
	for _, table := range []string{"idempotency_keys", "rides", "audit_records", "staged_jobs"} {
		if n := b.Count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Fatalf("want nothing stored, %s has %d rows", table, n)
		}
	}
	if n := b.Stripe.ChargeRequests(); n != 0 {
		t.Fatalf("want Stripe not called, got %d charge requests", n)
	}
}

// rideCreated decodes a 201 body.
func (r *response) rideCreated(t *testing.T) resource.RideCreated {
	t.Helper()
	if r.status != http.StatusCreated {
		t.Fatalf("want 201, got %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("want application/json, got %q", ct)
	}
	var body resource.RideCreated
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Message == "" || body.Ride.ID == 0 || body.Ride.StripeChargeID == nil || body.Ride.CreatedAt.IsZero() {
		t.Fatalf("incomplete 201 body: %s", r.body)
	}
	return body
}
