package proctest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
)

// racyPackage is a program with a data race on purpose.
const racyPackage = "./internal/devenv/race/testdata/racy"

// TestRaceReportFailsTest builds a program with a data race as Build builds the commands, runs it
// through Start and through Run on behalf of a test, and checks that the race detector's report
// failed that test, report and all. Without -race the program has no detector, and fails nothing.
func TestRaceReportFailsTest(t *testing.T) {
	t.Parallel()
	bin := BuildPackage(t, racyPackage)
	check := func(t *testing.T, ran *fakeTB, code int) {
		t.Helper()
		errs := ran.errors()
		if !race.Enabled {
			if code != 0 || len(errs) > 0 {
				t.Errorf("without -race, want racy to exit 0 and fail nothing, got %d and %q", code, errs)
			}
			return
		}
		if code != race.ExitStatus {
			t.Errorf("want racy to exit %d, as the race detector makes it, got %d", race.ExitStatus, code)
		}
		if len(errs) != 1 || !strings.HasPrefix(errs[0], "racy reported a data race:\nWARNING: DATA RACE\n") ||
			!strings.Contains(errs[0], "main.main.func1()") {
			t.Errorf("want the test failed once with racy's race report, got %q", errs)
		}
	}

	t.Run("Start", func(t *testing.T) {
		t.Parallel()
		ran := &fakeTB{TB: t}
		p := Start(ran, bin, nil)
		code := p.Wait(t, time.Minute)
		ran.runCleanups() // as the test that started it ends
		check(t, ran, code)
	})
	t.Run("Run", func(t *testing.T) {
		t.Parallel()
		ran := &fakeTB{TB: t}
		_, _, code := Run(ran, bin, nil)
		check(t, ran, code)
	})
}

// fakeTB stands for a test on whose behalf proctest runs a process, and records its failures:
// a test of proctest checks that proctest fails a test, which it cannot see by failing itself.
// What it does not record goes to the real test, TB.
type fakeTB struct {
	testing.TB

	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Failed() bool { return len(f.errors()) > 0 }

// Fatalf is not what proctest does on a race report, but when it cannot run a process at all.
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.TB.Helper()
	f.TB.Fatalf("proctest gave up on the test: "+format, args...)
}

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeTB) errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...)
}

// runCleanups runs the cleanups, last registered first, as the testing package does.
func (f *fakeTB) runCleanups() {
	f.mu.Lock()
	cleanups := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}
