package main

import (
	"slices"
	"strings"
	"testing"
)

// TestSoakAPIEnv pins the faults each API soaks with: the first API's first booking to get
// Stripe's answer crashes for certain (a soak that drew no crash by chance would test none), and
// after that crash its first cancel to get Stripe's refund; after that second crash it crashes
// by chance only, at every point of a booking and of a cancel, like the other even APIs; odd
// APIs stall once Stripe answered.
func TestSoakAPIEnv(t *testing.T) {
	t.Parallel()

	st := &stack{cfg: &config{crashProb: 0.01}, apiPorts: []int{7001, 7002, 7003}, baseEnv: []string{"DATABASE_URL=x"}}
	faults := func(env []string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "FAULTS="); ok {
				return v
			}
		}
		return ""
	}
	const byChance = "ride_created=crash@0.01,charge_answered=crash@0.01,finished=crash@0.01," +
		"cancel_claimed=crash@0.01,refund_answered=crash@0.01"

	env, afterCrash := st.soakAPIEnv(0)
	if got, want := faults(env), "charge_answered=crash"; got != want {
		t.Errorf("first API: want FAULTS=%s, got %q", want, got)
	}
	if len(afterCrash) != 2 {
		t.Fatalf("first API: want an environment after each of its two forced crashes, got %d", len(afterCrash))
	}
	if got, want := faults(afterCrash[0]), "refund_answered=crash"; got != want {
		t.Errorf("first API after its first crash: want FAULTS=%s, got %q", want, got)
	}
	if got := faults(afterCrash[1]); got != byChance {
		t.Errorf("first API after its second crash: want FAULTS=%s, got %q", byChance, got)
	}
	for _, e := range append([][]string{env}, afterCrash...) {
		if !slices.Contains(e, "PORT=7001") || !slices.Contains(e, "DATABASE_URL=x") {
			t.Errorf("first API: want PORT=7001 and the base environment throughout, got %v", e)
		}
	}

	env, afterCrash = st.soakAPIEnv(1)
	if got := faults(env); !strings.HasPrefix(got, "charge_answered=stall:") || !strings.Contains(got, ",refund_answered=stall:") ||
		!strings.HasSuffix(got, "@0.01") {
		t.Errorf("second API: want chance stalls once Stripe charged or refunded, got FAULTS=%q", got)
	}
	if afterCrash != nil {
		t.Errorf("second API: want no environment of its own after a crash, got %v", afterCrash)
	}

	env, _ = st.soakAPIEnv(2)
	if got := faults(env); got != byChance {
		t.Errorf("third API: want crashes by chance only, FAULTS=%s, got %q", byChance, got)
	}

	// Settling runs the APIs with no faults at all.
	if got := faults(st.apiEnv(0, false, "")); got != "" {
		t.Errorf("settling API: want no FAULTS, got %q", got)
	}
}
