package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// requireRateLimited checks a 429 problem with one of codes, the budget it names, and a
// Retry-After of whole seconds.
func (r *response) requireRateLimited(t *testing.T, codes ...problem.Code) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("want 429, got %d: %s", r.status, r.body)
	}
	p := r.problem(t)
	if !slices.Contains(codes, p.Code) {
		t.Fatalf("want the 429's code one of %q, got %q: %s", codes, p.Code, r.body)
	}
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("want Retry-After in whole seconds, got %q", r.header.Get("Retry-After"))
	}
}

// requireBudgetSpent checks a 429 that names budget, in its code and in its detail.
func (r *response) requireBudgetSpent(t *testing.T, code problem.Code, budget string) {
	t.Helper()
	r.requireRateLimited(t, code)
	if detail := r.problem(t).Detail; !strings.Contains(detail, "rider's "+budget+" budget") {
		t.Fatalf("want the 429's detail to name the %s budget, got %q", budget, detail)
	}
}

// getRide reads ride id back as rider.
func (b *testBundle) getRide(t *testing.T, rider *ridetest.Rider, id int64) *response {
	t.Helper()
	return b.do(t, http.MethodGet, "/rides/"+strconv.FormatInt(id, 10), map[string]string{"Authorization": "Bearer " + rider.Token}, "")
}

// TestRiderBudgets holds each of a rider's budgets to what it limits, on the default limits
// with their clock stopped, so that no budget refills while a test spends it.
func TestRiderBudgets(t *testing.T) {
	t.Parallel()
	opts := setupOpts{limits: &api.Limits{}, limitsClockStopped: true}

	// A rider who spent the booking budget is refused new bookings, by name, and nothing of
	// them is stored; but replays of finished keys, cancels and reads go on.
	t.Run("BookingBudgetSpentLeavesReplaysCancelsAndReads", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{limits: opts.limits, limitsClockStopped: true, metrics: m})
		var firstID int64
		for i := range api.RiderRideBurstDefault {
			ride := b.postRide(t, b.Rider, fmt.Sprintf("key-budget-%04d-0123456789", i), testBody).rideCreated(t).Ride
			if i == 0 {
				firstID = ride.ID
			}
		}
		b.postRide(t, b.Rider, "key-budget-over-0123456789", testBody).requireBudgetSpent(t, problem.CodeBookingRateLimited, "booking")
		if n := b.Count(t, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'key-budget-over-0123456789'"); n != 0 {
			t.Fatalf("want no key stored for the refused booking, got %d", n)
		}

		replay := b.postRide(t, b.Rider, "key-budget-0000-0123456789", testBody)
		if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("want the finished key's 201 replayed, got %d (Idempotent-Replayed %q): %s",
				replay.status, replay.header.Get("Idempotent-Replayed"), replay.body)
		}
		b.cancelRide(t, b.Rider, cancelKey, firstID).requireStatus(t, http.StatusOK)
		b.getRide(t, b.Rider, firstID).requireStatus(t, http.StatusOK)
		b.do(t, http.MethodGet, "/rides", map[string]string{"Authorization": "Bearer " + b.Rider.Token}, "").requireStatus(t, http.StatusOK)

		// Still refused: neither the replay nor the cancel gave a booking back.
		b.postRide(t, b.Rider, "key-budget-over-0123456789", testBody).requireBudgetSpent(t, problem.CodeBookingRateLimited, "booking")
		if n := len(b.SucceededCharges()); n != api.RiderRideBurstDefault {
			t.Fatalf("want %d charges, one per booking, got %d", api.RiderRideBurstDefault, n)
		}
		// Both refusals counted as the booking budget's, and as ride requests refused.
		if n := testutil.ToFloat64(m.RateLimited.WithLabelValues("rider_booking_rate")); n != 2 {
			t.Fatalf("want rocketrides_rate_limited_total{limit=\"rider_booking_rate\"} 2, got %v", n)
		}
		if n := testutil.ToFloat64(m.RideRequests.WithLabelValues(metrics.RideRateLimited)); n != 2 {
			t.Fatalf("want rocketrides_ride_requests_total{outcome=\"rate_limited\"} 2, got %v", n)
		}
	})

	// A burst of cancels spends the cancel budget, and its 429 names it; the bookings and the
	// replays of finished cancels are untouched.
	t.Run("CancelBurstSpendsTheCancelBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, opts)
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		for i := range api.RiderCancelBurstDefault {
			r := b.cancelRide(t, b.Rider, fmt.Sprintf("%s-%04d", cancelKey, i), ride.ID)
			if want := map[bool]int{true: http.StatusOK, false: http.StatusConflict}[i == 0]; r.status != want {
				t.Fatalf("cancel %d: want %d, got %d: %s", i, want, r.status, r.body)
			}
		}
		b.cancelRide(t, b.Rider, cancelKey+"-over", ride.ID).requireBudgetSpent(t, problem.CodeCancelRateLimited, "cancel")
		if n := b.Count(t, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key = $1", cancelKey+"-over"); n != 0 {
			t.Fatalf("want the refused cancel's key not stored, got %d", n)
		}

		replay := b.cancelRide(t, b.Rider, cancelKey+"-0000", ride.ID)
		if replay.status != http.StatusOK || replay.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("want the finished cancel's 200 replayed, got %d: %s", replay.status, replay.body)
		}
		b.postRide(t, b.Rider, testKey+"-2", testBody).rideCreated(t)
		if n := len(b.Stripe.Refunds()); n != 1 {
			t.Fatalf("want one refund, got %d", n)
		}
	})

	// Replays and retries spend the request budget, which every booking and cancel spends
	// before it is read, and whose 429 names it: a replay is cheap, not free.
	t.Run("ReplaysSpendTheRequestBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, opts)
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		for range api.RiderRequestBurstDefault - 1 {
			if r := b.postRide(t, b.Rider, testKey, testBody); r.status != http.StatusCreated {
				t.Fatalf("want the 201 replayed, got %d: %s", r.status, r.body)
			}
		}
		b.postRide(t, b.Rider, testKey, testBody).requireBudgetSpent(t, problem.CodeRequestRateLimited, "request")
		b.cancelRide(t, b.Rider, cancelKey, ride.ID).requireBudgetSpent(t, problem.CodeRequestRateLimited, "request")
		b.getRide(t, b.Rider, ride.ID).requireStatus(t, http.StatusOK)
	})
}

// heldAtLock is setupOpts.lockWait for a test that holds a request at a locked table while it
// sends others: a request that gave up its wait would free the very slot the test is about.
const heldAtLock = 2 * time.Minute

func TestRateLimits(t *testing.T) {
	t.Parallel()

	t.Run("EightyConcurrentBookingsFromOneRider", func(t *testing.T) {
		t.Parallel()
		// Three at once (RiderRidesInFlightDefault) conflict on the rider's index page; under
		// load their retries outlast the default budget, and the answer would be a 409.
		b := setup(t, setupOpts{limits: &api.Limits{}, conflictRetryBudget: time.Minute})
		responses := make([]*response, 80)
		var wg sync.WaitGroup
		for i := range responses {
			wg.Go(func() {
				responses[i] = b.postRide(t, b.Rider, fmt.Sprintf("key-eighty-%04d-0123456789", i), testBody)
			})
		}
		wg.Wait()

		created, limited := 0, 0
		for _, r := range responses {
			switch r.status {
			case http.StatusCreated:
				created++
			case http.StatusTooManyRequests:
				limited++
				r.requireRateLimited(t, problem.CodeBookingRateLimited, problem.CodeRequestRateLimited)
			default:
				t.Fatalf("want 201 or 429, got %d: %s", r.status, r.body)
			}
		}
		if limited == 0 || created == 0 || created > api.RiderRideBurstDefault {
			t.Fatalf("want at most the burst (%d) booked and the rest refused, got %d booked, %d refused",
				api.RiderRideBurstDefault, created, limited)
		}
		// A refused request stores nothing: one key, ride and charge for each booking.
		for _, table := range []string{"idempotency_keys", "rides"} {
			if n := b.Count(t, "SELECT count(*) FROM "+table); n != created {
				t.Fatalf("want %d rows in %s, one per booking, got %d", created, table, n)
			}
		}
		if n := len(b.SucceededCharges()); n != created {
			t.Fatalf("want %d charges, got %d", created, n)
		}
	})

	t.Run("ShedsPastTheInFlightCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: &api.Limits{MaxRequestsInFlight: 1}, lockWait: heldAtLock})
		unlock := b.lockTable(t, "idempotency_keys") // reached once the request holds its slot
		stuck := make(chan *response, 1)
		go func() { stuck <- b.postRide(t, b.Rider, "key-stuck-0123456789abc", testBody) }()
		b.waitForLockWaiters(t, 1)

		r := b.postRide(t, b.Rider, "key-shed-0123456789abcd", testBody)
		r.requireProblem(t, http.StatusServiceUnavailable, problem.CodeServiceUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("want Retry-After on a shed request")
		}
		unlock()
		if got := <-stuck; got.status != http.StatusCreated {
			t.Fatalf("want the request in flight booked once the table is free, got %d: %s", got.status, got.body)
		}
	})

	// A valid rider who shares an address with a guesser (a carrier's NAT) is not refused for
	// the guesser's tokens, which cost no lookup and count against nothing.
	t.Run("ValidRiderBehindAGuessingAddress", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: &api.Limits{}})
		badToken := map[string]string{"Authorization": "Bearer rr_not_a_token", "Idempotency-Key": "key-bad-token-0123456789", "Content-Type": "application/json"}
		for range 100 {
			b.do(t, http.MethodPost, "/rides", badToken, testBody).requireProblem(t, http.StatusUnauthorized, problem.CodeUnauthorized)
		}
		b.postRide(t, b.Rider, "key-valid-behind-nat-0123", testBody).rideCreated(t)
	})

	// Behind a trusted proxy, the ride records the client that X-Forwarded-For names.
	t.Run("RecordsTheForwardedClient", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{
			limits:         &api.Limits{},
			trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		})
		headers := map[string]string{"Authorization": "Bearer " + b.Rider.Token, "Idempotency-Key": "key-forwarded-0123456789",
			"Content-Type": "application/json", "X-Forwarded-For": "192.0.2.66, 198.51.100.9"}
		b.do(t, http.MethodPost, "/rides", headers, testBody).rideCreated(t)
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys WHERE origin_ip = '198.51.100.9'`); n != 1 {
			t.Fatalf("want the key's origin the forwarded client 198.51.100.9, found %d such keys", n)
		}
	})

	// A rider's ride requests in progress are capped, others' are not: with the rider's one
	// allowed request held at the database, a second is refused at once, while another rider's
	// goes through to the database. (One, so that the test's pool, of four connections, holds the
	// lock, the two requests and the test's own queries.) The two, let go at once, conflict on the
	// keys' index page; under load their retries outlast the default budget, and one would get a 409.
	t.Run("CapsOneRidersRidesInFlight", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: &api.Limits{RiderRidesInFlight: 1}, lockWait: heldAtLock, conflictRetryBudget: time.Minute})
		other := b.NewRider(t, "tok_visa")
		unlock := b.lockTable(t, "idempotency_keys")
		held := make(chan *response, 2)
		go func() { held <- b.postRide(t, b.Rider, "key-held-0123456789abcdef", testBody) }()
		b.waitForLockWaiters(t, 1)

		b.postRide(t, b.Rider, "key-second-0123456789abc", testBody).requireRateLimited(t, problem.CodeRequestRateLimited)
		go func() { held <- b.postRide(t, other, "key-other-0123456789abcd", testBody) }()
		b.waitForLockWaiters(t, 2) // admitted: it waits at the database like the rider's

		unlock()
		for range 2 {
			if r := <-held; r.status != http.StatusCreated {
				t.Fatalf("want the requests in flight booked once the table is free, got %d: %s", r.status, r.body)
			}
		}
	})

	// One rider's reads are capped apart from bookings and from other riders, and take a slot of
	// the process only once admitted: with the process down to two slots and the rider's one
	// allowed read held at the database, the rider's further reads are refused at once, and
	// another rider's read is admitted and answered.
	t.Run("OneRidersReadsLeaveOthersAnswered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: &api.Limits{RiderReadsInFlight: 1, MaxRequestsInFlight: 2}, lockWait: heldAtLock})
		other := b.NewRider(t, "tok_visa")
		read := func(rider *ridetest.Rider) *response {
			return b.do(t, http.MethodGet, "/rides/1", map[string]string{"Authorization": "Bearer " + rider.Token}, "")
		}
		unlock := b.lockTable(t, "rides")
		held := make(chan *response, 2)
		go func() { held <- read(b.Rider) }()
		b.waitForLockWaiters(t, 1)

		for range 20 {
			read(b.Rider).requireRateLimited(t, problem.CodeReadRateLimited)
		}
		go func() { held <- read(other) }()
		b.waitForLockWaiters(t, 2) // admitted: it waits at the database like the rider's
		unlock()
		for range 2 {
			if r := <-held; r.status != http.StatusNotFound { // no ride 1: answered, not refused
				t.Fatalf("want the reads in flight answered once the table is free, got %d: %s", r.status, r.body)
			}
		}
	})

	// A client that trickles its booking's body holds no slot of the process while it sends:
	// with one slot, another rider books while the slow body is still coming.
	t.Run("SlowBodyHoldsNoSlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: &api.Limits{MaxRequestsInFlight: 1}})
		other := b.NewRider(t, "tok_visa")
		conn, err := net.Dial("tcp", b.server.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /rides HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer %s\r\n"+
			"Idempotency-Key: key-slow-body-0123456789\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			b.Rider.Token, len(testBody), testBody[:5])

		r := b.postRide(t, other, "key-while-slow-0123456789", testBody)
		if r.status != http.StatusCreated {
			t.Fatalf("want the other rider booked while a body trickles in, got %d: %s", r.status, r.body)
		}
	})

	t.Run("OffLetsEverythingThrough", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: &api.Limits{Off: true, RiderRideBurst: 1, RiderRidesPerMinute: 1}})
		for i := range 5 {
			b.postRide(t, b.Rider, fmt.Sprintf("key-off-%04d-0123456789", i), testBody).rideCreated(t)
		}
	})
}

// lockTable takes an ACCESS EXCLUSIVE lock on table until the returned function is called.
func (b *testBundle) lockTable(t *testing.T, table string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(unlock)
	return unlock
}

// waitForLockWaiters waits until n backends wait for a lock, as long as a request held at one
// does (heldAtLock): the deadline only ends a test whose requests never get there.
func (b *testBundle) waitForLockWaiters(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(heldAtLock); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b.Count(t, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()") >= n {
			return
		}
	}
	t.Fatalf("fewer than %d backends waited for the lock", n)
}
