package api_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

// The benchmarks send POST /rides through the real router over loopback HTTP: authentication,
// validation, the phases on a real Postgres, and a Stripe charge to the in-process stand-in.
// They run only with -bench:
//
//	go test -run '^$' -bench . -benchtime 200x ./api
//
// Each run of a benchmark function gets a fresh database, dropped when it ends.

type benchBundle struct {
	*ridetest.Bundle
	server *httptest.Server
}

func benchSetup(b *testing.B) *benchBundle {
	b.Helper()
	bundle := ridetest.Setup(b)
	logger := slog.New(slog.DiscardHandler)
	executor := phases.New(bundle.Pool, bundle.StripeClient, logger, phases.Config{})
	server := httptest.NewServer(api.NewServer(bundle.Pool, executor, logger, api.Config{Limits: api.Limits{Off: true}, TokenKey: ridetest.TokenKey}).Handler())
	b.Cleanup(server.Close)
	return &benchBundle{Bundle: bundle, server: server}
}

// postRide sends a ride request as the test rider and returns the status and whether it was a
// replay, having read the whole body so that the connection is reused.
func (bb *benchBundle) postRide(b *testing.B, key string) (status int, replayed bool) {
	b.Helper()
	req, err := http.NewRequest(http.MethodPost, bb.server.URL+"/rides", bytes.NewBufferString(testBody))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bb.Rider.Token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := bb.server.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
}

// BenchmarkPostRides books a ride with a new key per op.
func BenchmarkPostRides(b *testing.B) {
	b.ReportAllocs() // the stand-in and the client run in this process: their allocations count too
	bb := benchSetup(b)

	n := 0
	for b.Loop() {
		n++
		if status, replayed := bb.postRide(b, fmt.Sprintf("bench-key-%016d", n)); status != http.StatusCreated || replayed {
			b.Fatalf("want a new 201, got %d (replayed %t)", status, replayed)
		}
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)/s, "rides/s")
	}
	bb.requireBooked(b, n)
}

// BenchmarkPostRidesReplay sends again a request whose key finished: the stored 201 comes back.
func BenchmarkPostRidesReplay(b *testing.B) {
	bb := benchSetup(b)
	if status, _ := bb.postRide(b, testKey); status != http.StatusCreated {
		b.Fatalf("want 201, got %d", status)
	}

	for b.Loop() {
		if status, replayed := bb.postRide(b, testKey); status != http.StatusCreated || !replayed {
			b.Fatalf("want a replayed 201, got %d (replayed %t)", status, replayed)
		}
	}
	bb.requireBooked(b, 1)
}

// requireBooked checks that the benchmark booked what it claims: a ride and a charge per key.
func (bb *benchBundle) requireBooked(b *testing.B, want int) {
	b.Helper()
	if n := bb.Count(b, `SELECT count(*) FROM rides WHERE stripe_charge_id IS NOT NULL`); n != want {
		b.Fatalf("want %d charged rides, got %d", want, n)
	}
	if n := len(bb.SucceededCharges()); n != want {
		b.Fatalf("want Stripe to hold %d charges, got %d", want, n)
	}
}
