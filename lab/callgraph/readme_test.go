package main

import (
	"slices"
	"testing"
)

func TestParseReadme(t *testing.T) {
	t.Parallel()

	t.Run("ReadingOrder", func(t *testing.T) {
		t.Parallel()
		r := parseReadme(`# Project

| Table | before the heading |
| --- | --- |
| ` + "`x/before.go`" + ` | not in the reading order |

### Reading order

One ride in three files:

| # | File | What to look for |
| --- | --- | --- |
| 1 | [` + "`api/rides.go`" + `](api/rides.go) | the handler, ` + "`createRide`" + ` |
| 2 | ` + "`phases/create_ride.go`" + ` | the loop, its ` + "`switch`" + ` |
| 3 | [models](models/idempotency_key.go) | the SQL |

| Another table | under the same heading |
| --- | --- |
| ` + "`x/after.go`" + ` | not a row of the reading order |

## Next
`)
		want := []string{"api/rides.go", "phases/create_ride.go", "models/idempotency_key.go"}
		if !slices.Equal(r.readingOrder, want) {
			t.Errorf("reading order %v, want %v", r.readingOrder, want)
		}
		if r.hasSkipSection {
			t.Error("found a skip section in a README without one")
		}
		if place, skipped := r.fileCoverage("phases/create_ride.go"); place != 2 || skipped {
			t.Errorf("phases/create_ride.go: place %d, skipped %v; want 2, false", place, skipped)
		}
		if place, skipped := r.fileCoverage("phases/executor.go"); place != 0 || skipped {
			t.Errorf("phases/executor.go: place %d, skipped %v; want 0, false", place, skipped)
		}
	})

	t.Run("SkipSection", func(t *testing.T) {
		t.Parallel()
		r := parseReadme(`# Project

### Reading order

| # | File |
| --- | --- |
| 1 | ` + "`api/rides.go`" + ` |

### What to skip on a first read

| What | Why |
| --- | --- |
| ` + "`api/connguard.go`" + ` | connection limits |
| ` + "`phases.(*Executor).keepLease`" + ` | the lease |

- ` + "`models.RideInsert`" + ` and ` + "`internal/jobargs/`" + `: plumbing; ` + "`SERIALIZABLE`" + ` is no name.

### After

- ` + "`phases/executor.go`" + ` is in no skip section.
`)
		if !r.hasSkipSection {
			t.Fatal("found no skip section")
		}
		if want := []string{"api/connguard.go", "internal/jobargs/"}; !slices.Equal(r.skipFiles, want) {
			t.Errorf("files skipped %v, want %v", r.skipFiles, want)
		}
		if want := []string{"phases.(*Executor).keepLease", "models.RideInsert"}; !slices.Equal(r.skipFuncs, want) {
			t.Errorf("functions skipped %v, want %v", r.skipFuncs, want)
		}
		for _, tt := range []struct {
			file        string
			wantSkipped bool
		}{
			{"api/connguard.go", true},
			{"internal/jobargs/jobargs.go", true},
			{"phases/executor.go", false},
			{"api/rides.go", false}, // in the reading order instead
		} {
			if _, skipped := r.fileCoverage(tt.file); skipped != tt.wantSkipped {
				t.Errorf("%s skipped: %v, want %v", tt.file, skipped, tt.wantSkipped)
			}
		}
		for _, tt := range []struct {
			name        string
			wantSkipped bool
		}{
			{"phases.(*Executor).keepLease", true},
			{"phases.(*Executor).keepLease$1", true}, // its closure
			{"phases.Executor.keepLease", true},
			{"phases.(*Executor).renewLease", false},
			{"models.RideInsert", true},
			{"models.RideGetByIDForUser", false},
		} {
			if got := r.funcSkipped(tt.name); got != tt.wantSkipped {
				t.Errorf("%s skipped: %v, want %v", tt.name, got, tt.wantSkipped)
			}
		}
	})
}
