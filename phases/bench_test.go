package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// The benchmarks run the real thing: SERIALIZABLE transactions on a real Postgres, and a real
// stripe-go charge over HTTP to the in-process Stripe stand-in. They run only with -bench:
//
//	go test -run '^$' -bench . -benchtime 200x ./phases
//
// Each run of a benchmark function gets a fresh database, dropped when it ends.

// benchParallelRiders is how many riders BenchmarkCreateRideParallel spreads its keys over.
// Under SERIALIZABLE, concurrent requests of one rider conflict on shared index pages even with
// different keys; real traffic comes from many riders, so the keys of one rider should be rare.
const benchParallelRiders = 8

// benchParallelism is goroutines per GOMAXPROCS in the parallel benchmark. A request spends
// most of its time waiting on Postgres and Stripe, not on the CPU, so one goroutine per core
// would leave the cores idle.
const benchParallelism = 4

// benchMaxTries bounds how often a parallel request is sent again after a conflict, as a
// client would, before the benchmark fails.
const benchMaxTries = 20

func benchSetup(b *testing.B) (*ridetest.Bundle, *Executor) {
	b.Helper()
	bundle := ridetest.Setup(b)
	return bundle, New(bundle.Pool, bundle.StripeClient, slog.New(slog.DiscardHandler), Config{})
}

func benchRequest(rider *ridetest.Rider, key string) *CreateRideRequest {
	return &CreateRideRequest{
		KeyedRequest: KeyedRequest{
			User:           rider.User,
			IdempotencyKey: key,
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		Params: testParams,
	}
}

func benchKey(n int64) string { return fmt.Sprintf("bench-key-%016d", n) }

// BenchmarkCreateRide is one new key per op: the whole graph, four SERIALIZABLE transactions
// and a Stripe charge.
func BenchmarkCreateRide(b *testing.B) {
	b.ReportAllocs() // the stand-in runs in this process: its allocations count too
	bundle, executor := benchSetup(b)
	ctx := context.Background()

	var n int64
	for b.Loop() {
		n++
		outcome, err := executor.CreateRide(ctx, benchRequest(bundle.Rider, benchKey(n)))
		if err != nil || outcome.StatusCode != statusCreated || outcome.Replayed {
			b.Fatalf("want a new 201, got %+v, %v", outcome, err)
		}
	}
	reportRidesPerSecond(b, n)
	requireBooked(b, bundle, int(n))
}

// BenchmarkCreateRideReplay asks again about a key that finished: the first atomic phase alone,
// which finds the stored response.
func BenchmarkCreateRideReplay(b *testing.B) {
	bundle, executor := benchSetup(b)
	ctx := context.Background()
	req := benchRequest(bundle.Rider, benchKey(1))
	if outcome, err := executor.CreateRide(ctx, req); err != nil || outcome.StatusCode != statusCreated {
		b.Fatalf("want 201, got %+v, %v", outcome, err)
	}

	for b.Loop() {
		outcome, err := executor.CreateRide(ctx, req)
		if err != nil || outcome.StatusCode != statusCreated || !outcome.Replayed {
			b.Fatalf("want a replayed 201, got %+v, %v", outcome, err)
		}
	}
	requireBooked(b, bundle, 1)
}

// BenchmarkCreateRideParallel books rides with distinct keys from several goroutines at once,
// spread over benchParallelRiders riders. A request that gives up on serialization conflicts
// (ErrConflict, a 409 to clients) is sent again with its key, as the client would; retries/op
// says how often.
func BenchmarkCreateRideParallel(b *testing.B) {
	bundle, executor := benchSetup(b)
	riders := make([]*ridetest.Rider, benchParallelRiders)
	for i := range riders {
		riders[i] = bundle.NewRider(b, "tok_visa")
	}
	ctx := context.Background()
	var keys, retries atomic.Int64

	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := keys.Add(1)
			req := benchRequest(riders[n%benchParallelRiders], benchKey(n))
			for try := 1; ; try++ {
				outcome, err := executor.CreateRide(ctx, req)
				if errors.Is(err, ErrConflict) && try < benchMaxTries {
					retries.Add(1)
					continue
				}
				if err != nil || outcome.StatusCode != statusCreated {
					b.Errorf("want 201, got %+v, %v", outcome, err)
					return
				}
				break
			}
		}
	})
	b.StopTimer()
	reportRidesPerSecond(b, keys.Load())
	b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/op")
	requireBooked(b, bundle, int(keys.Load()))
}

// reportRidesPerSecond adds the throughput, which reads more easily than ns/op, above all for
// the parallel benchmark, whose ns/op is wall time divided among the goroutines.
func reportRidesPerSecond(b *testing.B, rides int64) {
	b.Helper()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(rides)/s, "rides/s")
	}
}

// requireBooked checks that the benchmark booked what it claims: a ride and a charge per key.
func requireBooked(b *testing.B, bundle *ridetest.Bundle, want int) {
	b.Helper()
	if n := bundle.Count(b, `SELECT count(*) FROM rides WHERE stripe_charge_id IS NOT NULL`); n != want {
		b.Fatalf("want %d charged rides, got %d", want, n)
	}
	if n := len(bundle.SucceededCharges()); n != want {
		b.Fatalf("want Stripe to hold %d charges, got %d", want, n)
	}
}

// BenchmarkDecodeCharge decodes the stand-in's answer to a charge the way stripe-go's
// Charges.New does (into stripe.Charge) and the way sendCharge does (into stripeMade), to show
// what the narrow decode saves the API on every booking.
func BenchmarkDecodeCharge(b *testing.B) {
	stand := fakestripe.NewTestServer(b, fakestripe.Options{})
	sc := stripeclient.New(stripeclient.Config{APIKey: ridetest.StripeAPIKey, URL: stand.URL})
	customer, err := sc.Customers.New(&stripe.CustomerParams{Email: stripe.String("rider@example.com"), Source: stripe.String("tok_visa")})
	if err != nil {
		b.Fatal(err)
	}
	charge, err := sc.Charges.New(&stripe.ChargeParams{Amount: stripe.Int64(RideAmountCents), Currency: stripe.String(RideCurrency), Customer: stripe.String(customer.ID)})
	if err != nil {
		b.Fatal(err)
	}
	body := charge.LastResponse.RawJSON
	for _, into := range []struct {
		name string
		new  func() any
	}{
		{"StripeCharge", func() any { return &stripe.Charge{} }},
		{"StripeMade", func() any { return &stripeMade{} }},
	} {
		b.Run(into.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := json.Unmarshal(body, into.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
