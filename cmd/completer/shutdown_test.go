package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
)

func TestRunsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	b := ridetest.Setup(t)
	key := abandon(t, b, b.Rider, "cmd-completer-key-running")

	p := proctest.Start(t, bin, env(b, "COMPLETER_INTERVAL=100ms"))
	proctest.WaitOutput(t, p, "Completer: pushed keys", 15*time.Second)
	p.Terminate(t, 10*time.Second)
	if !strings.Contains(p.Output(), "Completer: stopped") {
		t.Fatalf("want a clean stop logged:\n%s", p.Output())
	}
	if p := recoveryPoint(t, b, key); p != models.RecoveryPointFinished {
		t.Fatalf("want the key finished, got %s", p)
	}
}
