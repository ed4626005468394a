package main

import (
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

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
