package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// faultKind names a fault the harness injects from outside the processes.
type faultKind string

const (
	faultAPIKill         faultKind = "api_sigkill"             // SIGKILL an API replica
	faultAPIFreeze       faultKind = "api_freeze"              // SIGSTOP an API replica past the lease, then SIGCONT
	faultBackgroundKill  faultKind = "background_sigkill"      // SIGKILL the enqueuer or the completer
	faultDeploy          faultKind = "sigterm_restart"         // restart any process with SIGTERM, as a deploy does
	faultStripe500       faultKind = "stripe_error_500"        // Stripe answers 500 without charging
	faultStripeTimeout   faultKind = "stripe_timeout"          // Stripe holds the request until the API gives up
	faultStripeDrop      faultKind = "stripe_charge_then_drop" // Stripe charges, then drops the connection
	faultStripeLatency   faultKind = "stripe_latency"          // Stripe slows down for a while
	faultRefund500       faultKind = "stripe_refund_error_500" // Stripe answers a refund 500 without refunding
	faultRefundDrop      faultKind = "stripe_refund_then_drop" // Stripe refunds, then drops the connection
	faultDashboardRefund faultKind = "stripe_dashboard_refund" // someone refunds a booked ride's charge at Stripe's dashboard
	faultDispute         faultKind = "stripe_dispute"          // a rider's bank disputes a booked ride's charge
	faultDatabaseRestart faultKind = "db_restart"              // the database stops, and starts again
	faultFailoverKill    faultKind = "db_failover_kill"        // -ha: the primary's machine dies; the standby takes over
	faultFailoverFreeze  faultKind = "db_failover_freeze"      // -ha: the primary's machine hangs; the standby takes over
)

// randomFaultKinds are drawn at random for the schedule, with their weights. Database
// restarts are placed apart (see schedule), as each costs every process its connections.
var randomFaultKinds = []struct {
	kind   faultKind
	weight int
}{
	{faultAPIKill, 3},
	{faultAPIFreeze, 1},
	{faultBackgroundKill, 1},
	{faultDeploy, 1},
	{faultStripe500, 3},
	{faultStripeTimeout, 2},
	{faultStripeDrop, 3},
	{faultStripeLatency, 1},
	{faultRefund500, 1},
	{faultRefundDrop, 2},
	{faultDashboardRefund, 1},
	{faultDispute, 1},
}

// stripeFaultNames are the stand-in's names of the queued Stripe faults of charges, and
// refundFaultNames of refunds. A refund fault is queued for refunds alone, which cancels send one
// in ten rides or so: it strikes whenever the next refund comes.
var (
	stripeFaultNames = map[faultKind]string{
		faultStripe500:     "error_500",
		faultStripeTimeout: "timeout",
		faultStripeDrop:    "charge_then_drop",
	}
	refundFaultNames = map[faultKind]string{
		faultRefund500:  "error_500",
		faultRefundDrop: "charge_then_drop",
	}
)

// Schedule shape. A fault every 1.5 s on average keeps a few always in play (a Stripe fault
// costs a client the 5 s Retry-After of a 503, a crash the lock timeout) without leaving the
// service no time to make progress; the quiet seconds at both ends let the soak start and end
// on a working system.
const (
	meanFaultGap = 1500 * time.Millisecond
	quietStart   = 2 * time.Second
	quietEnd     = 2 * time.Second
)

// fault is one scheduled fault. Every parameter is drawn when the schedule is made, so that a
// seed fixes the schedule entirely.
type fault struct {
	at     time.Duration // since the soak started
	kind   faultKind
	target int           // which replica or process, modulo how many there are
	count  int           // how many Stripe faults to queue
	pause  time.Duration // how long the database stays down, or Stripe stays slow
	delay  time.Duration // Stripe's latency meanwhile
}

func (f fault) String() string {
	s := fmt.Sprintf("%6.2fs %s", f.at.Seconds(), f.kind)
	switch f.kind {
	case faultAPIKill, faultAPIFreeze, faultBackgroundKill, faultDeploy:
		s += fmt.Sprintf(" target=%d", f.target)
	case faultStripe500, faultStripeTimeout, faultStripeDrop, faultRefund500, faultRefundDrop:
		s += fmt.Sprintf(" count=%d", f.count)
	case faultDashboardRefund, faultDispute:
		s += fmt.Sprintf(" ride=%d", f.target)
	case faultStripeLatency:
		s += fmt.Sprintf(" latency=%s for=%s", f.delay, f.pause)
	case faultDatabaseRestart:
		s += fmt.Sprintf(" down=%s", f.pause)
	}
	return s
}

// schedule draws the faults of a soak of duration from seed: random kinds at random times,
// every kind at least once, and dbRestarts database restarts spread evenly across it.
func schedule(seed uint64, duration time.Duration, dbRestarts int) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x636861_6f73)) // "chaos": a stream of its own
	window := max(duration-quietStart-quietEnd, time.Second)
	totalWeight := 0
	for _, k := range randomFaultKinds {
		totalWeight += k.weight
	}

	var faults []fault
	seen := map[faultKind]bool{}
	for at := quietStart + jitter(rng, meanFaultGap); at < quietStart+window; at += jitter(rng, meanFaultGap) {
		w := rng.IntN(totalWeight)
		var kind faultKind
		for _, k := range randomFaultKinds {
			if w < k.weight {
				kind = k.kind
				break
			}
			w -= k.weight
		}
		faults = append(faults, newFault(rng, at, kind))
		seen[kind] = true
	}
	for _, k := range randomFaultKinds {
		if !seen[k.kind] {
			faults = append(faults, newFault(rng, quietStart+time.Duration(rng.Int64N(int64(window))), k.kind))
		}
	}
	for i := range dbRestarts {
		slot := window / time.Duration(dbRestarts)
		at := quietStart + slot*time.Duration(i) + slot/4 + time.Duration(rng.Int64N(int64(slot/2)))
		faults = append(faults, newFault(rng, at, faultDatabaseRestart))
	}
	slices.SortStableFunc(faults, func(a, b fault) int { return int(a.at - b.at) })
	return faults
}

func newFault(rng *rand.Rand, at time.Duration, kind faultKind) fault {
	f := fault{at: at, kind: kind, target: rng.IntN(1 << 16), count: 1 + rng.IntN(3)}
	switch kind {
	case faultStripeTimeout:
		f.count = 1 // each costs a request the whole Stripe timeout
	case faultStripeLatency:
		f.delay = time.Duration(100+rng.IntN(700)) * time.Millisecond
		f.pause = time.Duration(1+rng.IntN(3)) * time.Second
	case faultDatabaseRestart:
		// Up to two seconds down: long enough for every pooled connection to break and every
		// request in flight to fail, short of the 10 s a starting process waits for its database.
		f.pause = time.Duration(200+rng.IntN(1800)) * time.Millisecond
	}
	return f
}

// jitter is a random duration in [mean/2, 3*mean/2).
func jitter(rng *rand.Rand, mean time.Duration) time.Duration {
	return mean/2 + time.Duration(rng.Int64N(int64(mean)))
}
