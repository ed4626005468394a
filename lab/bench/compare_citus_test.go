package main

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/cituscluster"
)

// TestCompareCitus runs the Citus comparison small: both targets book rides on the plain
// Postgres and on the Citus cluster, and the table gives each side's rides per second and the
// ratios.
func TestCompareCitus(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster, a Citus cluster of three nodes, the API and pgbench")
	}
	if err := cituscluster.Installed(); errors.Is(err, cituscluster.ErrNotInstalled) {
		t.Skip(err)
	}
	out := requireOK(t, "-compare-citus", "-rides", "0", "-clients", "2", "-duration", "2s")
	for _, target := range []string{targetTwoTx, targetAPI} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + ` rides/s\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no rides/s row for %s in:\n%s", target, out)
		}
		for i, side := range []string{sidePlain, sideCitus, "ratio"} {
			if v, _ := strconv.ParseFloat(m[i+1], 64); v <= 0 {
				t.Errorf("%s, %s: want more than 0, got %s", target, side, m[i+1])
			}
		}
	}
	if !regexp.MustCompile(`(?m)^API ÷ twotx rides/s\s+[0-9.]+\s+[0-9.]+`).MatchString(out) {
		t.Errorf("no API ÷ twotx row in:\n%s", out)
	}
	if !strings.Contains(out, "not its scale-out") {
		t.Errorf("no word on the nodes sharing the machine in:\n%s", out)
	}
}

// TestCompareCitusUsage: -compare-citus excludes the other modes and their flags, and takes
// whole seconds, as -compare-ha does.
func TestCompareCitusUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-compare-citus", "-compare"},
		{"-compare-citus", "-compare-ha"},
		{"-compare-citus", "-receipts"},
		{"-compare-citus", "-solo-duration", "5s"},
		{"-compare-citus", "-server-log", "x.log"},
		{"-compare-citus", "-token", "rr_x"},
		{"-compare-citus", "-duration", "1500ms"},
	} {
		if code, _, stderr := runBench(args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: want usage error, got %d", args, code)
		}
	}
	opts, err := parseOptions([]string{"-compare-citus", "-rides", "10", "-riders", "2", "-api-pool", "8", "-give-up-after", "5s"},
		func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.mode != modeCompareCitus || opts.clients != compareClientsDefault {
		t.Errorf("want mode %s at %d clients, got %s at %d", modeCompareCitus, compareClientsDefault, opts.mode, opts.clients)
	}
}

// TestPrintCitus prints a made-up comparison: both sides' figures, the ratios, the rides lost
// with aborted pgbench clients, and the caveat.
func TestPrintCitus(t *testing.T) {
	t.Parallel()
	runs := []*measurement{
		{side: sidePlain, target: targetTwoTx, ridesPerSecond: 2000, p50: 15 * time.Millisecond, p99: 50 * time.Millisecond},
		{side: sidePlain, target: targetAPI, ridesPerSecond: 1000, p50: 30 * time.Millisecond, p99: 60 * time.Millisecond},
		{side: sideCitus, target: targetTwoTx, ridesPerSecond: 500, p50: 16 * time.Millisecond, p99: 140 * time.Millisecond, aborted: 12, replaced: 12, replacementStartup: 400 * time.Millisecond},
		{side: sideCitus, target: targetAPI, ridesPerSecond: 250, p50: 90 * time.Millisecond, p99: 280 * time.Millisecond},
	}
	var out bytes.Buffer
	printCitus(&out, &options{clients: 32, duration: 15 * time.Second, rides: 30000}, runs)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^target\s+plain\s+Citus\s+Citus ÷ plain$`),
		regexp.MustCompile(`(?m)^twotx pgbench rides/s\s+2000\s+500\s+0\.25$`),
		regexp.MustCompile(`(?m)^twotx pgbench p50 / p99 ms\s+15\.0 / 50\.0\s+16\.0 / 140\.0`),
		regexp.MustCompile(`(?m)^API rides/s\s+1000\s+250\s+0\.25$`),
		regexp.MustCompile(`(?m)^API ÷ twotx rides/s\s+0\.50\s+0\.50`),
		regexp.MustCompile(`twotx pgbench on Citus: 12 rides lost`),
		regexp.MustCompile(`12 new pgbench processes took their riders over, each a median 400 ms .*: about 1 % of the run's client time`),
		regexp.MustCompile(`share this machine's \d+ CPUs`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("want %s in:\n%s", want, out.String())
		}
	}
}

// TestPgbenchCitusAborts: a pgbench that exited 2 only because it aborted clients whose COMMIT
// Citus failed is no failure, since they were replaced; one that aborted a client for anything
// else is.
func TestPgbenchCitusAborts(t *testing.T) {
	t.Parallel()
	exit2 := exec.Command("sh", "-c", "exit 2").Run()
	citusAbort := "pgbench: error: client 3 script 0 aborted in command 22 query 0: ERROR:  could not commit transaction for shard 102020 on at least one active node"
	otherAbort := "pgbench: error: client 4 script 0 aborted in command 5 query 0: ERROR:  relation \"rides\" does not exist"
	if m := pgbenchCitusAbort.FindStringSubmatch(citusAbort); m == nil || m[1] != "3" {
		t.Fatalf("want client 3's abort recognised, got %q", m)
	}
	if pgbenchCitusAbort.MatchString(otherAbort) || !pgbenchAbort.MatchString(otherAbort) {
		t.Fatal("want only Citus's failed COMMIT recognised as such")
	}

	replaced := &pgbenchProc{err: exit2, aborts: 1, stderr: []string{"WARNING:  could not serialize access due to read/write dependencies among transactions", citusAbort}}
	if err := replaced.check(); err != nil {
		t.Errorf("want no error for a replaced client, got %v", err)
	}
	other := &pgbenchProc{err: exit2, aborts: 1, stderr: []string{citusAbort, otherAbort}}
	if err := other.check(); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("want the other abort reported, got %v", err)
	}
}
