package stripeclient_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// TestConnectionsAreKept charges through the client the processes use: 100 charges one after
// another, then two bursts of 32 at once, which the stand-in holds until all 32 have arrived so
// that each burst needs 32 connections at the same moment, however loaded the machine. The calls
// reuse the connections of earlier calls: the connections opened follow the most calls in flight
// at once, not the number of calls.
func TestConnectionsAreKept(t *testing.T) {
	t.Parallel()
	const burst = 32
	s := startStandIn(t)
	m := metrics.NewStripe(nil)
	sc := stripeclient.New(stripeclient.Config{APIKey: "sk_test_connections", URL: s.url, Timeout: time.Minute, Metrics: m})
	customer, err := sc.Customers.New(&stripe.CustomerParams{Source: stripe.String("tok_visa")})
	if err != nil {
		t.Fatalf("error creating a customer: %v", err)
	}
	opened := func() int { return int(testutil.ToFloat64(m.ConnectionsOpened)) }

	for i := range 100 {
		if err := charge(sc, customer.ID, fmt.Sprintf("sequential-%d", i)); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	t.Logf("a customer and 100 charges one after another opened %d connections", opened())
	if n := opened(); n < 1 || n > 4 {
		t.Fatalf("want a customer and 100 charges one after another on at most 4 connections, opened %d", n)
	}

	chargeAtOnce := func(name string) int {
		before := opened()
		s.hold(burst)
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				if err := charge(sc, customer.ID, fmt.Sprintf("%s-%d", name, i)); err != nil {
					t.Errorf("%s charge %d: %v", name, i, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%s: %d charges at once opened %d connections", name, burst, opened()-before)
		return opened() - before
	}
	if n := chargeAtOnce("first-burst"); n > burst || opened() < burst {
		t.Fatalf("want %d charges held at once to need %d connections in all, opening at most %d; opened %d, %d in all",
			burst, burst, burst, n, opened())
	}
	// Each of the second burst finds a connection the first left open. A connection's reuse
	// also waits on Go's transport confirming the request was written, which a starved goroutine
	// can miss: so a margin of 2.
	if n := chargeAtOnce("second-burst"); n > 2 {
		t.Fatalf("want %d charges at once on the connections the first %d left open, but %d new ones were opened", burst, burst, n)
	}
	if n := len(s.Charges()); n != 100+2*burst {
		t.Fatalf("want %d charges at Stripe, got %d", 100+2*burst, n)
	}
}

// TestRequestsAreSentWithTheirLength: stripe-go sets a request's body only after making the
// request, which left net/http to send it chunked, headers and body in two writes. The stand-in
// sees each request, a charge among them, with a Content-Length that is its body's length, and
// without stripe-go's telemetry of the call before.
func TestRequestsAreSentWithTheirLength(t *testing.T) {
	t.Parallel()
	s := startStandIn(t)
	sc := stripeclient.New(stripeclient.Config{APIKey: "sk_test_length", URL: s.url})
	customer, err := sc.Customers.New(&stripe.CustomerParams{Source: stripe.String("tok_visa")})
	if err != nil {
		t.Fatalf("error creating a customer: %v", err)
	}
	if err := charge(sc, customer.ID, "length-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Customers.Get(customer.ID, nil); err != nil {
		t.Fatal(err)
	}

	seen := s.requestsSeen()
	if len(seen) != 3 || seen[1].path != "POST /v1/charges" || seen[1].bodyBytes == 0 {
		t.Fatalf("want a customer, a charge with a body and a read, got %+v", seen)
	}
	for _, r := range seen {
		if r.chunked || r.contentLength != int64(r.bodyBytes) {
			t.Errorf("%s: want Content-Length %d and no chunked encoding, got Content-Length %d, chunked %t",
				r.path, r.bodyBytes, r.contentLength, r.chunked)
		}
		if r.telemetry {
			t.Errorf("%s: want no telemetry of the call before, got X-Stripe-Client-Telemetry", r.path)
		}
	}
}

// charge charges customerID once under idempotencyKey.
func charge(sc *client.API, customerID, idempotencyKey string) error {
	params := &stripe.ChargeParams{
		Amount:   stripe.Int64(2000),
		Currency: stripe.String(string(stripe.CurrencyUSD)),
		Customer: stripe.String(customerID),
	}
	params.SetIdempotencyKey(idempotencyKey)
	_, err := sc.Charges.New(params)
	return err
}

// standIn is the Stripe stand-in on a loopback port, behind a handler that can hold charges.
type standIn struct {
	*fakestripe.Server
	url string

	held atomic.Pointer[barrier] // the charges being held, nil for none

	mu   sync.Mutex
	seen []requestSeen
}

// requestSeen is how a request reached the stand-in: the length it was announced with
// (-1: unknown), whether it was chunked, and the length of its body.
type requestSeen struct {
	path          string
	contentLength int64
	chunked       bool
	bodyBytes     int
	telemetry     bool // it carried X-Stripe-Client-Telemetry
}

func startStandIn(t *testing.T) *standIn {
	t.Helper()
	s := &standIn{Server: fakestripe.New(fakestripe.Options{})}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.seen = append(s.seen, requestSeen{path: r.Method + " " + r.URL.Path, contentLength: r.ContentLength,
			chunked: slices.Contains(r.TransferEncoding, "chunked"), bodyBytes: len(body),
			telemetry: r.Header.Get("X-Stripe-Client-Telemetry") != ""})
		s.mu.Unlock()

		if b := s.held.Load(); b != nil && r.URL.Path == "/v1/charges" {
			b.wait()
		}
		s.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.Server.Close()
		hs.Close()
	})
	s.url = hs.URL
	return s
}

func (s *standIn) requestsSeen() []requestSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// hold holds each charge from now on until n charges are held, then lets them all go on.
func (s *standIn) hold(n int) { s.held.Store(&barrier{n: n, released: make(chan struct{})}) }

// barrier lets its callers go on once n of them are waiting.
type barrier struct {
	n        int
	mu       sync.Mutex
	arrived  int
	released chan struct{}
}

func (b *barrier) wait() {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.released)
	}
	b.mu.Unlock()
	<-b.released
}
