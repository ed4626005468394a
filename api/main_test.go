package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/dbtest"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	*ridetest.Bundle
	server *httptest.Server
}

type setupOpts struct {
	simulateErrors bool

	// freshStripeConnections makes every Stripe call use a new connection. On a reused one,
	// Go's transport re-sends a request with an Idempotency-Key by itself when the connection
	// drops, which hides a drop from the code under test.
	freshStripeConnections bool
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	b := ridetest.Setup(t)
	sc := b.StripeClient
	if opts.freshStripeConnections {
		sc = b.FreshConnStripeClient()
	}
	logger := slog.New(slog.DiscardHandler)
	executor := phases.New(b.Pool, sc, logger, phases.Config{SimulateErrors: opts.simulateErrors})
	server := httptest.NewServer(api.NewServer(b.Pool, executor, logger, nil).Handler())
	t.Cleanup(server.Close)
	return &testBundle{Bundle: b, server: server}
}

const (
	testKey  = "0ccb7813-e63d-4377-93c5-476cb93038f3"
	testBody = `{"origin_lat": 37.7749, "origin_lon": -122.4194, "target_lat": 37.3382, "target_lon": -121.8863}`
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

// do sends a request with the given headers (nil values are left out).
func (b *testBundle) do(t *testing.T, method, path string, headers map[string]string, body string) *response {
	t.Helper()
	req, err := http.NewRequest(method, b.server.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
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
func (r *response) rideCreated(t *testing.T) phases.RideCreatedBody {
	t.Helper()
	if r.status != http.StatusCreated {
		t.Fatalf("want 201, got %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("want application/json, got %q", ct)
	}
	var body phases.RideCreatedBody
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Message == "" || body.Ride.ID == 0 || body.Ride.StripeChargeID == nil || body.Ride.CreatedAt.IsZero() {
		t.Fatalf("incomplete 201 body: %s", r.body)
	}
	return body
}
