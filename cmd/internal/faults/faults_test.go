package faults

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/phases"
)

func TestParse(t *testing.T) {
	t.Parallel()

	if inj, err := Parse("", nil); inj != nil || err != nil {
		t.Fatalf("want no injector for an empty spec, got %v %v", inj, err)
	}

	inj, err := Parse("ride_created=crash, charge_answered=stall:5s,finished=crash@0.25", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	want := map[phases.FaultPoint]rule{
		phases.FaultPointRideCreated:    {crash: true, probability: 1},
		phases.FaultPointChargeAnswered: {stall: 5 * time.Second, probability: 1},
		phases.FaultPointFinished:       {crash: true, probability: 0.25},
	}
	for point, r := range want {
		if inj.rules[point] != r {
			t.Fatalf("%s: want %+v, got %+v", point, r, inj.rules[point])
		}
	}

	for _, bad := range []string{"nowhere=crash", "started=crash", "finished", "finished=explode", "finished=stall:", "finished=crash@2", "finished=crash@x"} {
		if _, err := Parse(bad, nil); err == nil {
			t.Fatalf("want %q refused", bad)
		}
	}
}

func TestAt(t *testing.T) {
	t.Parallel()
	inj, err := Parse("ride_created=crash,finished=stall:10ms", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	inj.kill = func() { killed++ }

	inj.At(context.Background(), phases.FaultPointChargeAnswered) // no rule: nothing happens
	inj.At(context.Background(), phases.FaultPointRideCreated)
	start := time.Now()
	inj.At(context.Background(), phases.FaultPointFinished)
	if killed != 1 || time.Since(start) < 10*time.Millisecond {
		t.Fatalf("want one crash and a 10 ms stall, got %d crashes, %s", killed, time.Since(start))
	}
}
