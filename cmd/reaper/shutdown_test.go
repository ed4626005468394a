package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

func TestRunsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "reaper")
	b := ridetest.Setup(t)
	oldKeys(t, b)

	p := proctest.Start(t, bin, []string{"DATABASE_URL=" + b.Pool.Config().ConnString()})
	proctest.WaitOutput(t, p, "Reaper: reaped keys", 15*time.Second)
	p.Terminate(t, 10*time.Second)
	if !strings.Contains(p.Output(), "Reaper: stopped") {
		t.Fatalf("want a clean stop logged:\n%s", p.Output())
	}
	if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("want every key reaped, %d left", n)
	}
}
