package main

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// oldKeys makes two ride requests 73 hours old: one finished, one left at ride_created by a
// Stripe 500.
func oldKeys(t *testing.T, b *ridetest.Bundle) {
	t.Helper()
	executor := phases.New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), phases.Config{})
	for i, key := range []string{"cmd-reaper-key-finished", "cmd-reaper-key-unfinished"} {
		if i == 1 {
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		}
		_, err := executor.CreateRide(context.Background(), &phases.CreateRideRequest{
			User:           b.Rider.User,
			IdempotencyKey: key,
			Params:         phases.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4},
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		})
		if (err != nil) != (i == 1) {
			t.Fatalf("unexpected outcome for %s: %v", key, err)
		}
	}
	b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '73 hours'`)
}

func TestOncePrintsCounts(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "reaper")
	b := ridetest.Setup(t)
	oldKeys(t, b)
	env := []string{"DATABASE_URL=" + b.Pool.Config().ConnString()}

	out, errOut, code := proctest.Run(t, bin, env, "-once")
	if code != 0 {
		t.Fatalf("want exit 0, got %d: %s", code, errOut)
	}
	if out != `{"reaped":2,"abandoned":1}`+"\n" {
		t.Fatalf("want exactly one JSON line of counts, got %q (stderr %s)", out, errOut)
	}
	if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE idempotency_key = 'cmd-reaper-key-unfinished'`); n != 1 {
		t.Fatalf("want the unfinished key recorded, got %d records", n)
	}

	if out, _, code := proctest.Run(t, bin, env, "-once"); code != 0 || out != `{"reaped":0,"abandoned":0}`+"\n" {
		t.Fatalf("want nothing left to reap, got %d %q", code, out)
	}
}

func TestRunsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "reaper")
	b := ridetest.Setup(t)
	oldKeys(t, b)

	p := proctest.Start(t, bin, []string{"DATABASE_URL=" + b.Pool.Config().ConnString()})
	proctest.WaitOutput(t, p, "Reaper: reaped keys", 15*time.Second)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 after SIGTERM, got %d:\n%s", code, p.Output())
	}
	if !strings.Contains(p.Output(), "Reaper: stopped") {
		t.Fatalf("want a clean stop logged:\n%s", p.Output())
	}
	if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("want every key reaped, %d left", n)
	}
}
