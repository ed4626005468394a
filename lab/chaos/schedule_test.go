package main

import (
	"slices"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t.Parallel()

	t.Run("SameSeedSameSchedule", func(t *testing.T) {
		t.Parallel()
		a, b := schedule(7, time.Minute, 4), schedule(7, time.Minute, 4)
		if !slices.Equal(a, b) {
			t.Errorf("want equal schedules for one seed, got\n%v\n%v", a, b)
		}
		if c := schedule(8, time.Minute, 4); slices.Equal(a, c) {
			t.Errorf("want another schedule for another seed")
		}
	})

	t.Run("EveryKindWithinTheQuietEnds", func(t *testing.T) {
		t.Parallel()
		for seed := range uint64(50) {
			faults := schedule(seed, 10*time.Second, 2)
			seen := map[faultKind]int{}
			for i, f := range faults {
				seen[f.kind]++
				if f.at < quietStart || f.at > 10*time.Second-quietEnd {
					t.Errorf("seed %d: fault %v outside the soak's middle", seed, f)
				}
				if i > 0 && f.at < faults[i-1].at {
					t.Errorf("seed %d: faults out of order: %v", seed, faults)
				}
			}
			for _, k := range randomFaultKinds {
				if seen[k.kind] == 0 {
					t.Errorf("seed %d: no %s in %v", seed, k.kind, faults)
				}
			}
			if seen[faultDatabaseRestart] != 2 {
				t.Errorf("seed %d: want 2 database restarts, got %d", seed, seen[faultDatabaseRestart])
			}
		}
	})
}
