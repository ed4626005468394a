package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

func TestFormatCPUs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{[]int{0, 1}, "0-1"},
		{[]int{1}, "1"},
		{[]int{0, 2, 3, 4, 7}, "0,2-4,7"},
		{nil, ""},
	} {
		if got := formatCPUs(tc.cpus); got != tc.want {
			t.Errorf("%v: want %q, got %q", tc.cpus, tc.want, got)
		}
	}
}

// TestCPUSplitPlaces pins a shell and its child, standing in for Postgres, and a stand-in
// process, and reads back where the kernel lets each run, this process's threads included.
// Not parallel: it moves this process's threads, which run the other tests.
func TestCPUSplitPlaces(t *testing.T) {
	split, err := newCPUSplit()
	if err != nil {
		t.Skipf("cannot split the CPUs here: %s", err)
	}
	start := func(name string, args ...string) int {
		t.Helper()
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	postmaster := start("sh", "-c", "sleep 60 & wait")
	standIn := start("sleep", "60")
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		tree, err := descendants("/proc", postmaster)
		if err != nil {
			t.Fatal(err)
		}
		if len(tree) > 0 {
			child = tree[0].pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell started no child")
		}
	}
	t.Cleanup(func() {
		if err := split.place(placementShared, postmaster, standIn); err != nil {
			t.Error(err)
		}
	})

	all, postgres, rest := formatCPUs(cpusOf(&split.all)), formatCPUs(cpusOf(&split.postgres)), formatCPUs(cpusOf(&split.rest))
	requireCPUs := func(want string, pids ...int) {
		t.Helper()
		for _, pid := range pids {
			if got, err := readCPUs("/proc", pid); err != nil || got != want {
				t.Fatalf("process %d: want CPUs %s, got %q, %v", pid, want, got, err)
			}
		}
	}
	requireThreads := func(want string) {
		t.Helper()
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			got, err := readCPUs("/proc/self/task", mustAtoi(t, e.Name()))
			if err != nil || got != want {
				t.Fatalf("thread %s of this process: want CPUs %s, got %q, %v", e.Name(), want, got, err)
			}
		}
	}

	if err := split.place(placementPinned, postmaster, standIn); err != nil {
		t.Fatal(err)
	}
	if postgres == rest || strings.Contains(postgres, rest) {
		t.Fatalf("want Postgres's CPUs %s apart from the rest's %s", postgres, rest)
	}
	requireCPUs(postgres, postmaster, child)
	requireCPUs(rest, standIn, os.Getpid())
	requireThreads(rest)
	// A process started now inherits the rest's CPUs, as the API and pgbench do.
	requireCPUs(rest, start("sleep", "60"))

	if err := split.place(placementShared, postmaster, standIn); err != nil {
		t.Fatal(err)
	}
	requireCPUs(all, postmaster, child, standIn, os.Getpid())
	requireThreads(all)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestComparePinned runs the comparison shared and then pinned, at one client, with HEAD as the
// baseline, and checks that the report shows both and that each run's processes were seen on
// the CPUs it says. Not
// parallel: pinning moves this process's threads, which run the other tests.
func TestComparePinned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster, the API and pgbench")
	}
	split, err := newCPUSplit()
	if err != nil {
		t.Skipf("cannot split the CPUs here: %s", err)
	}
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	baselineTarget := "API at " + gitOutput(t, root, "rev-parse", "--short", "HEAD")
	out := requireOK(t, "-compare", "-pin=both", "-rides", "0", "-clients", "1", "-duration", "3s", "-solo-duration", "3s", "-baseline", "HEAD")
	all, postgres, rest := formatCPUs(cpusOf(&split.all)), formatCPUs(cpusOf(&split.postgres)), formatCPUs(cpusOf(&split.rest))

	_, shared, ok := strings.Cut(out, "\nShared: "+split.describe(placementShared)+"\n")
	shared, pinned, ok2 := strings.Cut(shared, "\nPinned: "+split.describe(placementPinned)+"\n")
	pinned, ratios, ok3 := strings.Cut(pinned, "\nRatios\n")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("want a shared section, a pinned one and the ratios, in:\n%s", out)
	}

	for _, section := range []struct {
		name, text, postgres, rest string
	}{{"shared", shared, all, all}, {"pinned", pinned, postgres, rest}} {
		for _, target := range append(slices.Clone(targets), baselineTarget) {
			m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(target) + `\s+1 client\s+(\d+) rides in .*CPUs: (?:API (\S+), )?Postgres (\S+), load generator (\S+), stand-in (\S+)$`).
				FindStringSubmatch(section.text)
			if m == nil {
				t.Fatalf("%s: no run of %s with its CPUs in:\n%s", section.name, target, section.text)
			}
			want := []string{section.rest, section.postgres, section.rest, section.rest}
			if target != targetAPI && target != baselineTarget {
				want[0] = ""
			}
			if got := m[2:]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, %s: want the API, Postgres, the load generator and the stand-in on CPUs %q, got %q", section.name, target, want, got)
			}
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `\s+1\s+[0-9.]+\s+[0-9.]+ ms`).MatchString(section.text) {
				t.Errorf("%s: no row for %s in:\n%s", section.name, target, section.text)
			}
		}
	}

	if !regexp.MustCompile(`(?m)^\s+shared\s+pinned$`).MatchString(ratios) {
		t.Fatalf("want a column of ratios for each placement in:\n%s", ratios)
	}
	for _, label := range []string{"API rides/s / twotx pgbench rides/s, 1 client", "API p50 / twotx pgbench p50, 1 client",
		"API CPU per ride ÷ baseline's, 1 client", "API rides/s ÷ baseline's, 1 client"} {
		m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(label) + `\s+([0-9.]+)\s+([0-9.]+)$`).FindStringSubmatch(ratios)
		if m == nil {
			t.Fatalf("no ratios %q for both placements in:\n%s", label, ratios)
		}
	}
}
