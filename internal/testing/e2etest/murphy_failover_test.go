package e2etest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/hacluster"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
	"github.com/rocketrides/rocketrides/phases"
)

// TestMurphyFailoverLosesACommit makes the standby asynchronous on purpose and keeps it from
// receiving anything, books a ride (the API commits both atomic phases on the primary alone and
// answers 201), then loses the primary's machine. The monitor promotes a standby that never
// heard of the ride: the request is forgotten, after Stripe charged it. The rider's retry with
// the same key, through the same API process, must get the charge Stripe already made back,
// and Stripe must hold one charge.
//
// With synchronous replication, the formation's normal state, no acknowledged commit is lost
// this way (internal/devenv/hacluster's TestFormation, and the failover soak); this is the
// defence for when one is anyway: an asynchronous standby, a restore from a backup.
func TestMurphyFailoverLosesACommit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ha, s := newFormationStack(t, ctx)
	api := s.startAPI(0)

	if err := ha.SetSynchronous(ctx, false); err != nil {
		t.Fatal(err)
	}
	resume, err := ha.PauseReplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	first, err := s.client(api.URL).CreateRideWithKey(ctx, key, murphyParams)
	if err != nil {
		t.Fatalf("want the ride booked on the primary alone, got %v", err)
	}
	charges := s.stripeCharges().Succeeded(s.key(key).StripeKey)
	if len(charges) != 1 {
		t.Fatalf("want one charge before the failover, got %+v", charges)
	}

	old, err := ha.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ha.Kill(old); err != nil {
		t.Fatal(err)
	}
	_ = resume() // the WAL senders died with their primary
	if err := ha.WaitPromoted(ctx, 1-old); err != nil {
		t.Fatal(err)
	}
	s.pool.Reset() // its connections were to the lost primary
	if s.keyExists(key) {
		t.Fatal("the promoted standby holds the key: the failover lost nothing, and the test shows nothing")
	}

	retried, err := s.client(api.URL).CreateRideWithKey(ctx, key, murphyParams)
	if err != nil {
		t.Fatalf("want the retry booked after the failover, got %v", err)
	}
	if retried.Ride.StripeChargeID == nil || *retried.Ride.StripeChargeID != *first.Ride.StripeChargeID {
		t.Errorf("want the retry to record the first charge %s, got %v", *first.Ride.StripeChargeID, deref(retried.Ride.StripeChargeID))
	}
	if n := len(s.stripeCharges().Succeeded("")); n != 1 {
		t.Errorf("want Stripe to hold one charge, got %d: the rider was charged twice", n)
	}
	s.assertBookedOnce(key, retried)
}

// TestMurphyPrimaryFreezes freezes the primary's machine (SIGSTOP of its keeper and Postgres:
// connections to it are neither answered nor closed) under a ride request. The request must be
// answered 503 within the API's deadlines (a phase's 5 s, then the unlock's 1 s), not held for
// as long as the machine hangs; once the standby is promoted the client's retries book the ride,
// once; and when the old primary thaws, it takes no write: it comes back as the standby.
func TestMurphyPrimaryFreezes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ha, s := newFormationStack(t, ctx)
	api := s.startAPI(0)
	c := s.client(api.URL)
	if _, err := c.CreateRideWithKey(ctx, newKey(t), murphyParams); err != nil {
		t.Fatalf("want a ride booked before the freeze, got %v", err)
	}

	old, err := ha.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ha.Freeze(old); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	started := time.Now()
	first := s.post(api.URL, key, murphyParams)
	if took := time.Since(started); first.Status != http.StatusServiceUnavailable || took > frozenAnswerWithin {
		t.Fatalf("want 503 within %s while the primary is frozen, got %d after %s: %s", frozenAnswerWithin, first.Status, took, first)
	} else {
		t.Logf("answered %d after %s while the primary was frozen", first.Status, took.Round(time.Millisecond))
	}

	res, err := c.CreateRideWithKey(ctx, key, murphyParams)
	if err != nil {
		t.Fatalf("want the ride booked once the standby took over, got %v", err)
	}
	if primary, err := ha.Primary(ctx); err != nil || primary != 1-old {
		t.Fatalf("want node%d promoted, the monitor has %d (%v)", 2-old, primary+1, err)
	}
	if err := ha.Thaw(old); err != nil {
		t.Fatal(err)
	}
	if err := ha.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if primary, err := ha.Primary(ctx); err != nil || primary != 1-old {
		t.Fatalf("want node%d to stay primary after the old one thawed, the monitor has %d (%v)", 2-old, primary+1, err)
	}
	s.pool.Reset()
	s.assertBookedOnce(key, res)
	s.assertTotals(2)
}

// frozenAnswerWithin bounds the answer to a request under a frozen primary, which comes after
// the phase's deadline (phases.PhaseTimeoutDefault) and the short unlock after it
// (phases.UnlockAfterOutageTimeout), 6 s. Without them the request would wait on the frozen
// primary for its whole RequestTimeoutDefault (45 s); the bound sits between the two, far from
// both, so that a loaded machine does not fail a correct system.
const frozenAnswerWithin = phases.RequestTimeoutDefault * 2 / 3

// newFormationStack starts a highly available Postgres of the test's own, a pg_auto_failover
// primary and its synchronous standby (tuned to fail over in seconds), migrated, and a Murphy
// stack on it.
func newFormationStack(t *testing.T, ctx context.Context) (*hacluster.Formation, *murphyStack) {
	t.Helper()
	if dbtest.OnCitus() {
		t.Skip("a failover formation is of plain Postgres; on Citus it would be one per node group (docs/scale-out.md), untested here")
	}
	ha, err := hacluster.Start(ctx, hacluster.Config{Tuned: true})
	if err != nil {
		t.Fatalf("error starting a highly available Postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := ha.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := migrations.Up(ctx, ha.URL()); err != nil {
		t.Fatal(err)
	}
	return ha, newMurphyStack(t, murphyOptions{DatabaseURL: ha.URL()})
}
