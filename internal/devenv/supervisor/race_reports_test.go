package supervisor

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
)

// TestRaceReports builds a program with a data race as Build builds the commands and runs it
// as a long-lived process and to its end: with -race, each run leaves its race report, under
// its label, in RaceReports, for a caller such as lab/chaos to fail on. Without -race the
// program has no detector, and leaves none.
func TestRaceReports(t *testing.T) {
	t.Parallel()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := BuildPackages(ctx, root, binDir, "./internal/devenv/race/testdata/racy"); err != nil {
		t.Fatal(err)
	}
	sup := New(binDir, NewPrefixWriter(io.Discard))
	p, err := sup.Start("racy-1", "racy", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	runErr := sup.RunToEnd(ctx, "racy", nil)

	reports := sup.RaceReports()
	if !race.Enabled {
		if len(reports) > 0 || p.Err() != nil || runErr != nil {
			t.Errorf("without -race, want racy to exit 0 and no reports, got %v, %v and %q", p.Err(), runErr, reports)
		}
		return
	}
	if len(reports) != 2 || !strings.HasPrefix(reports[0], "racy-1: WARNING: DATA RACE\n") || !strings.HasPrefix(reports[1], "racy: WARNING: DATA RACE\n") {
		t.Errorf("want racy-1's report and racy's, got %q", reports)
	}
	for _, err := range []error{p.Err(), runErr} {
		if exit, ok := errors.AsType[*exec.ExitError](err); !ok || exit.ExitCode() != race.ExitStatus {
			t.Errorf("want racy to exit %d, as the race detector makes it, got %v", race.ExitStatus, err)
		}
	}
}
