package main

import (
	"strings"
	"testing"
	"time"
)

// TestPrintRounds: each round's ratios print with the build that ran first, then their geometric
// mean, which a ratio and its inverse cancel in, and their range.
func TestPrintRounds(t *testing.T) {
	t.Parallel()
	run := func(target string, ridesPerSecond float64, cpuPerRide time.Duration) *measurement {
		return &measurement{target: target, clients: 32, placement: placementShared, rides: 1000,
			ridesPerSecond: ridesPerSecond, cpu: &cpuUse{api: 1000 * cpuPerRide}}
	}
	b := &baseline{short: "abc1234"}
	r := &report{opts: &options{baseline: b, rounds: 2}, placements: []placement{placementShared}, rounds: []roundPair{
		{api: run(targetAPI, 800, 800*time.Microsecond), baseline: run(b.target(), 1000, 640*time.Microsecond), apiFirst: true},
		{api: run(targetAPI, 1000, 640*time.Microsecond), baseline: run(b.target(), 800, 800*time.Microsecond)},
	}}
	var out strings.Builder
	r.printRounds(&out)
	for _, want := range []string{
		"shared     1      API                    0.80           1.25",
		"shared     2      API at abc1234         1.25           0.80",
		"shared     geometric mean                1.00           1.00",
		"shared     range                   0.80-1.25     0.80-1.25",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("want a line %q in\n%s", want, out.String())
		}
	}
}
