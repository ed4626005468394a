package main

import (
	"slices"
	"strings"
	"testing"
)

// TestSoakAPIEnv pins the faults each API soaks with: the first API's first request to get
// Stripe's answer crashes for certain (a soak that drew no crash by chance would test none),
// and after that crash it crashes by chance only, like the other even APIs; odd APIs stall.
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

	env, afterCrash := st.soakAPIEnv(0)
	if got, want := faults(env), "ride_created=crash@0.01,charge_answered=crash,finished=crash@0.01"; got != want {
		t.Errorf("first API: want FAULTS=%s, got %q", want, got)
	}
	if got, want := faults(afterCrash), "ride_created=crash@0.01,charge_answered=crash@0.01,finished=crash@0.01"; got != want {
		t.Errorf("first API after its crash: want FAULTS=%s, got %q", want, got)
	}
	if !slices.Contains(env, "PORT=7001") || !slices.Contains(afterCrash, "PORT=7001") {
		t.Errorf("first API: want PORT=7001 before and after its crash, got %v and %v", env, afterCrash)
	}

	env, afterCrash = st.soakAPIEnv(1)
	if got := faults(env); !strings.HasPrefix(got, "charge_answered=stall:") || !strings.HasSuffix(got, "@0.01") {
		t.Errorf("second API: want a chance stall at charge_answered, got FAULTS=%q", got)
	}
	if afterCrash != nil {
		t.Errorf("second API: want no environment of its own after a crash, got %v", afterCrash)
	}

	env, _ = st.soakAPIEnv(2)
	if got := faults(env); strings.Contains(got, "charge_answered=crash,") {
		t.Errorf("third API: want crashes by chance only, got FAULTS=%q", got)
	}

	// Settling runs the APIs with no faults at all.
	if got := faults(st.apiEnv(0, false, false)); got != "" {
		t.Errorf("settling API: want no FAULTS, got %q", got)
	}
}
