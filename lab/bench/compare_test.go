package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster, the API and pgbench")
	}
	// pgbench runs for whole seconds (-T): 3 s each, as a ride that a loaded machine stretches
	// past one second left a 1 s run with no ride (beside another test run, at load 20).
	// The baseline is this checkout's HEAD, built from a worktree of its own, a fourth target.
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	baselineTarget := "API at " + gitOutput(t, root, "rev-parse", "--short", "HEAD")
	allTargets := append(slices.Clone(targets), baselineTarget)
	isAPI := map[string]bool{targetAPI: true, baselineTarget: true}
	code, out, progress := runBench("-compare", "-rides", "0", "-clients", "2", "-duration", "3s", "-solo-duration", "3s", "-baseline", "HEAD")
	if code != exitOK {
		t.Fatalf("want exit %d, got %d:\n%s%s", exitOK, code, out, progress)
	}

	t.Run("DurableCluster", func(t *testing.T) {
		if want := "fsync=on synchronous_commit=on full_page_writes=on"; !strings.Contains(out, want) {
			t.Fatalf("want %q in the setting, got:\n%s", want, out)
		}
	})

	t.Run("BaselineBuiltFromAWorktreeThatIsGone", func(t *testing.T) {
		requireWorktreeRemoved(t, root, progress)
		if want := baselineTarget + ": cmd/api at " + gitOutput(t, root, "rev-parse", "HEAD"); !strings.Contains(out, want) {
			t.Fatalf("want %q in the setting, got:\n%s", want, out)
		}
	})

	t.Run("EveryTargetBookedRidesAtEachClientCount", func(t *testing.T) {
		for _, target := range allTargets {
			for _, clients := range []int{1, 2} {
				m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + fmt.Sprintf(`\s+%d\s+([0-9.]+)\s+([0-9.]+) ms\s+([0-9.]+) ms`, clients)).
					FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no row for %s at %d clients in:\n%s", target, clients, out)
				}
				if ridesPerSecond, _ := strconv.ParseFloat(m[1], 64); ridesPerSecond <= 0 {
					t.Errorf("%s at %d clients: want rides/s > 0, got %s", target, clients, m[1])
				}
				if p50, _ := strconv.ParseFloat(m[2], 64); p50 <= 0 {
					t.Errorf("%s at %d clients: want p50 > 0, got %s", target, clients, m[2])
				}
			}
		}
	})

	t.Run("Ratios", func(t *testing.T) {
		for _, label := range []string{
			"API rides/s / article pgbench rides/s, 2 clients",
			"API rides/s / twotx pgbench rides/s, 2 clients",
			"API p50 / twotx pgbench p50, 1 client",
			"API p99 / API p50, 2 clients",
			"API CPU per ride ÷ baseline's, 2 clients",
			"API alloc KB per ride ÷ baseline's, 2 clients",
			"API allocations per ride ÷ baseline's, 2 clients",
			"API rides/s ÷ baseline's, 2 clients",
		} {
			m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(label) + `\s+([0-9.]+)$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no ratio %q in:\n%s", label, out)
			}
			if r, _ := strconv.ParseFloat(m[1], 64); r <= 0 {
				t.Errorf("%s: want a positive ratio, got %s", label, m[1])
			}
		}
		if !regexp.MustCompile(`(?m)^  API 409 answers, all runs\s+\d+$`).MatchString(out) {
			t.Fatalf("no count of 409 answers in:\n%s", out)
		}
	})

	t.Run("CPUPerRide", func(t *testing.T) {
		_, section, ok := strings.Cut(out, "\nCPU per ride")
		section, _, _ = strings.Cut(section, "\nRuns\n")
		if !ok {
			t.Fatalf("no CPU per ride in:\n%s", out)
		}
		// Each process's time is whole ticks of 10 ms, which a short run on a loaded machine may
		// not reach, so each process is required to have spent something over all its runs.
		var postgres, loadGenerator, api, baseline, standIn float64
		for _, target := range allTargets {
			for _, clients := range []int{1, 2} {
				m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + fmt.Sprintf(`\s+%d`, clients) + strings.Repeat(`\s+(\S+)`, 7) + `$`).
					FindStringSubmatch(section)
				if m == nil {
					t.Fatalf("no CPU row for %s at %d clients in:\n%s", target, clients, section)
				}
				f := make([]float64, 8)
				for i := 2; i <= 5; i++ {
					var err error
					if f[i], err = strconv.ParseFloat(m[i], 64); err != nil {
						t.Fatalf("%s at %d clients: column %d is not a number: %s", target, clients, i, m[0])
					}
				}
				postgres, loadGenerator = postgres+f[2], loadGenerator+f[3]
				if !isAPI[target] {
					if m[1] != "-" || m[6] != "-" || m[7] != "-" {
						t.Errorf("%s at %d clients: want no API figures, got %s", target, clients, m[0])
					}
					if total, _ := strconv.ParseFloat(m[5], 64); total-f[2]-f[3]-f[4] > 2 || f[2]+f[3]+f[4]-total > 2 {
						t.Errorf("%s at %d clients: want all to be the sum of the processes (each rounded), got %s", target, clients, m[0])
					}
					continue
				}
				f[1], _ = strconv.ParseFloat(m[1], 64)
				standIn += f[4]
				if target == targetAPI {
					api += f[1]
				} else {
					baseline += f[1]
				}
				if total := f[5]; total-f[1]-f[2]-f[3]-f[4] > 2 || f[1]+f[2]+f[3]+f[4]-total > 2 {
					t.Errorf("%s at %d clients: want all to be the sum of the processes (each rounded), got %s", target, clients, m[0])
				}
				// Allocations are counted exactly: every ride makes some.
				kb, _ := strconv.ParseFloat(m[6], 64)
				allocs, _ := strconv.ParseFloat(m[7], 64)
				if kb <= 0 || allocs <= 0 {
					t.Errorf("%s at %d clients: want allocations per ride, got %s", target, clients, m[0])
				}
			}
		}
		for name, spent := range map[string]float64{"Postgres": postgres, "the load generators": loadGenerator, "the API": api,
			"the baseline": baseline, "the stand-in": standIn} {
			if spent <= 0 {
				t.Errorf("want %s to have spent CPU time in the runs, got:\n%s", name, section)
			}
		}
	})

	t.Run("CommitsPerRide", func(t *testing.T) {
		// A ride is the authentication's SELECT and then the transactions of the design: 1 + 4
		// for the article, 1 + 2 for twotx, and for the API 1 + 2 + the NOTIFY that wakes the
		// enqueuer after the ride's last commit (one per ride at one client; coalesced when many
		// rides commit at once). With one client nothing
		// conflicts, so nothing is retried. A run also counts a few commits that are no ride's,
		// whatever its length: each session's start commits, pgbench adds 3 (measured: its two
		// connections and a query), the API its pool's connections. They are a fixed number,
		// up to 7 seen, so they are allowed as such, not as a fraction of a ride: a loaded
		// machine books 25 rides in the run instead of 100, and 7 commits made the article's 5
		// a ride 5.28.
		const overheadMax = 12
		for target, want := range map[string]float64{targetArticle: 5, targetTwoTx: 3, targetAPI: 4} {
			m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `\s+1\s.*\s([0-9.]+)$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no row for %s at 1 client in:\n%s", target, out)
			}
			r := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(target) + `\s+1 client\s+(\d+) rides in `).FindStringSubmatch(out)
			if r == nil {
				t.Fatalf("no run details for %s at 1 client in:\n%s", target, out)
			}
			got, _ := strconv.ParseFloat(m[1], 64)
			rides, _ := strconv.Atoi(r[1])
			// The API's NOTIFY is sent after the commit by a goroutine of its own, and one still
			// waiting to be sent covers the next ride's too: on a loaded machine the next ride can
			// commit first even at one client (3.98 a ride seen), so it may fall short of one a ride.
			least := want
			if target == targetAPI {
				least = want - 1
			}
			// The printed figure is rounded to 0.01, which costs up to 0.005 a ride.
			if extra := (got - want) * float64(rides); got < least || extra > overheadMax+0.005*float64(rides) {
				t.Errorf("%s at 1 client: want %.0f commits per ride and at most %d more in the run, got %s a ride in %d rides",
					target, want, overheadMax, m[1], rides)
			}
		}
	})
}

func TestParsePgbenchOutput(t *testing.T) {
	t.Parallel()
	out := `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: article.sql
scaling factor: 1
query mode: prepared
number of clients: 4
number of threads: 2
maximum number of tries: 100
duration: 3 s
number of transactions actually processed: 449
number of failed transactions: 5 (1.101%)
number of transactions retried: 421 (92.731%)
total number of retries: 7426
latency average = 26.431 ms (including failures)
initial connection time = 7.192 ms
tps = 149.668413 (without initial connection time)
`
	m, err := parsePgbenchOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.ridesPerSecond != 149.668413 || m.rides != 449 || m.ridesFailed != 5 || m.ridesRetried != 421 || m.retries != 7426 {
		t.Fatalf("got %+v", m)
	}

	if _, err := parsePgbenchOutput(strings.Replace(out, "tps = ", "", 1)); err == nil {
		t.Fatal("want an error for output without tps")
	}
}

func TestCompareBaselineRevision(t *testing.T) {
	t.Parallel()
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("ResolvesToTheCommit", func(t *testing.T) {
		b, err := resolveBaseline(ctx, root, "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		if head := gitOutput(t, root, "rev-parse", "HEAD"); b.commit != head || !strings.HasPrefix(head, b.short) || b.target() != "API at "+b.short {
			t.Fatalf("want HEAD %s, got %+v named %q", head, b, b.target())
		}
	})

	t.Run("FailsOnARevisionThatDoesNotResolve", func(t *testing.T) {
		code, _, stderr := runBench("-compare", "-baseline", "no-such-revision")
		if code != exitUsage || !strings.Contains(stderr, `-baseline "no-such-revision" is not a commit`) {
			t.Fatalf("want usage error naming the revision, got %d: %s", code, stderr)
		}
	})

	t.Run("RemovesTheWorktreeWhenTheBuildFails", func(t *testing.T) {
		// The repository's first commit has no cmd/api to build.
		first := gitOutput(t, root, "rev-list", "--max-parents=0", "HEAD")
		code, _, progress := runBench("-compare", "-baseline", first)
		if code != exitFailed || !strings.Contains(progress, "error building cmd/api at ") {
			t.Fatalf("want exit %d saying the baseline did not build, got %d:\n%s", exitFailed, code, progress)
		}
		requireWorktreeRemoved(t, root, progress)
	})

	t.Run("FailsOutsideAGitCheckout", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := resolveBaseline(ctx, dir, "HEAD"); err == nil || !strings.Contains(err.Error(), "needs a git checkout") {
			t.Fatalf("want an error saying %s is not a git checkout, got %v", dir, err)
		}
	})
}

// gitOutput runs git in dir and returns its output, trimmed.
func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// requireWorktreeRemoved requires the worktree that progress, a comparison's, says the baseline
// was built in to be gone, from the disk and from the repository at root.
func requireWorktreeRemoved(t *testing.T, root, progress string) {
	t.Helper()
	m := regexp.MustCompile(`in a worktree at (\S+)`).FindStringSubmatch(progress)
	if m == nil {
		t.Fatalf("no worktree in the progress:\n%s", progress)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("want the worktree %s removed, got %v", m[1], err)
	}
	if list := gitOutput(t, root, "worktree", "list", "--porcelain"); strings.Contains(list, "worktree "+m[1]+"\n") {
		t.Errorf("want git to have forgotten the worktree %s, got:\n%s", m[1], list)
	}
	// supervisor.Build notes the checkout it builds for in its directory's .root file.
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	notes, err := filepath.Glob(filepath.Join(cache, "rocketrides", "*", ".root"))
	if err != nil {
		t.Fatal(err)
	}
	for _, note := range notes {
		if b, err := os.ReadFile(note); err == nil && string(b) == m[1] {
			t.Errorf("want the directory the worktree's commands were built in removed, got %s", filepath.Dir(note))
		}
	}
}
