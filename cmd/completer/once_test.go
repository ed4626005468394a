package main

import (
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
)

func TestOncePrintsCounts(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	b := ridetest.Setup(t)
	failing := abandon(t, b, b.Rider, "cmd-completer-key-failing")
	finishing := abandon(t, b, b.NewRider(t, "tok_visa"), "cmd-completer-key-finishing")
	// The least recently run key goes first, and meets Stripe's next 500.
	b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - interval '3 minutes' WHERE id = $1`, failing.ID)
	b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)

	out, errOut, code := proctest.Run(t, bin, env(b), "-once")
	if code != 0 {
		t.Fatalf("want exit 0, got %d: %s", code, errOut)
	}
	if out != `{"succeeded":1,"failed":1}`+"\n" {
		t.Fatalf("want exactly one JSON line of counts, got %q (stderr %s)", out, errOut)
	}
	if p := recoveryPoint(t, b, finishing); p != models.RecoveryPointFinished {
		t.Fatalf("want the key finished, got %s", p)
	}
	if p := recoveryPoint(t, b, failing); p != models.RecoveryPointRideCreated {
		t.Fatalf("want the failing key left at ride_created, got %s", p)
	}
	if n := len(b.SucceededCharges()); n != 1 {
		t.Fatalf("want 1 charge, got %d", n)
	}
}
