package main

import (
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestRefusesConfigurationThatLeavesNothingToComplete(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	_, errOut, code := proctest.Run(t, bin, []string{"DATABASE_URL=postgres://unused", "REAP_AFTER=30m"}, "-once")
	if code == 0 || !strings.Contains(errOut, "REAP_AFTER") {
		t.Fatalf("want a non-zero exit naming REAP_AFTER, got %d: %s", code, errOut)
	}
}
