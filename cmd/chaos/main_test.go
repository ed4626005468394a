package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestSoak runs the chaos binary for 40 s, as CI does, and requires that it found every
// invariant held, with faults of every kind fired and a fair number of rides booked through
// them, no request set aside for review, each receipt mailed once, but for the stated
// allowance, and no data race in any process (with -race, chaos and the processes it builds have
// the race detector). The seed is printed, so that a failing schedule can be replayed with -seed.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes about a minute")
	}
	t.Parallel()
	bin := proctest.Build(t, "chaos")
	seed := uint64(time.Now().UnixNano())
	dir := t.TempDir()
	summaryPath := filepath.Join(dir, "summary.json")
	logPath := filepath.Join(dir, "chaos.log")
	t.Logf("seed %d", seed)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-duration", "40s", "-clients", "8", "-seed", strconv.FormatUint(seed, 10),
		"-log", logPath, "-summary-json", summaryPath)
	cmd.Dir = "." // inside the module, where chaos finds the commands to build
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("chaos output:\n%s", out.String())
	for _, report := range race.Reports(out.String()) {
		t.Errorf("chaos reported a data race:\n%s", report)
	}
	if err != nil {
		t.Logf("tail of the processes' log:\n%s", tail(t, logPath, 80))
		if last := lastWordsOfUnexpectedExits(logPath, 20); last != "" {
			t.Logf("the last lines of processes that exited by themselves, other than APIs' crashes:\n%s", last)
		}
		t.Fatalf("chaos failed: %v", err)
	}

	var sum summary
	b, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Checked || len(sum.Violations) > 0 || len(sum.Failures) > 0 {
		t.Errorf("want the invariants checked, with no violations and no failures; got checked=%t, %q and %q",
			sum.Checked, sum.Violations, sum.Failures)
	}
	// On a loaded 2-core machine a healthy soak books several hundred rides; 100 means
	// the service was mostly down, which the faults should never achieve.
	if sum.Requests < 100 || sum.KeysCreated < 50 {
		t.Errorf("want at least 100 requests and 50 rides booked, got %d and %d", sum.Requests, sum.KeysCreated)
	}
	// None is left to chance: the schedule holds every kind, and the first API crashes itself
	// for certain on its first request that reaches forcedCrashPoint.
	if sum.SelfCrashesByPoint[string(forcedCrashPoint)] == 0 {
		t.Errorf("want the forced crash at %s, got self-crashes %v", forcedCrashPoint, sum.SelfCrashesByPoint)
	}
	for _, kind := range []string{
		string(faultAPIKill), "api_self_crash", string(faultStripe500), string(faultStripeTimeout),
		string(faultStripeDrop), string(faultDatabaseRestart),
	} {
		if sum.Faults[kind] == 0 {
			t.Errorf("want faults of kind %s fired, got none: %v", kind, sum.Faults)
		}
	}
	if sum.Receipts != sum.KeysCreated {
		t.Errorf("want a receipt for each of the %d rides booked, got %d", sum.KeysCreated, sum.Receipts)
	}
	// chaos fails on these itself; the test holds the summary to them as well, so that a
	// change to what chaos counts as a failure cannot quietly let them through.
	if len(sum.ForReview) > 0 {
		t.Errorf("want no request set aside for review, got %q", sum.ForReview)
	}
	if sum.Emails != sum.Receipts+sum.DuplicateEmails {
		t.Errorf("want every email a recorded receipt or a copy of one: %d emails, %d receipts, %d copies",
			sum.Emails, sum.Receipts, sum.DuplicateEmails)
	}
	if sum.DuplicateEmails > maxDuplicateReceiptsDefault {
		t.Errorf("want at most %d copy of a receipt mailed, got %d: %s", maxDuplicateReceiptsDefault, sum.DuplicateEmails, firstFew(sum.Duplicates, 5))
	}
}

// lastWordsOfUnexpectedExits finds, in the processes' log, each process that exited by itself
// without having crashed at a fault point, and returns up to n of its lines before the exit: the
// log is gone with the test's temporary directory, and its tail rarely reaches back that far.
func lastWordsOfUnexpectedExits(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		_, note, ok := strings.Cut(line, "| ")
		label, _, exited := strings.Cut(note[min(len(note), len("15:04:05.000 ")):], " exited by itself")
		if !ok || !strings.HasPrefix(line, "chaos ") || !exited || strings.Contains(label, " ") {
			continue
		}
		var own []string
		for j := i - 1; j >= 0 && len(own) < n; j-- {
			if l, _, _ := strings.Cut(lines[j], "|"); strings.TrimSpace(l) == label {
				own = append(own, lines[j])
			}
		}
		if len(own) > 0 && strings.Contains(own[0], `msg="Faults: crashing"`) {
			continue
		}
		slices.Reverse(own)
		fmt.Fprintf(&out, "%s\n%s\n", line, strings.Join(own, "\n"))
	}
	return out.String()
}

func tail(t *testing.T, path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

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

func TestRoundRobin(t *testing.T) {
	t.Parallel()
	var hits []string
	servers := make([]string, 3)
	for i := range servers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits = append(hits, strconv.Itoa(i)) // the requests below are sequential
		}))
		defer srv.Close()
		servers[i] = strings.TrimPrefix(srv.URL, "http://")
	}
	client := &http.Client{Transport: &roundRobin{hosts: servers, base: http.DefaultTransport}}
	for range 6 {
		resp, err := client.Get("http://" + servers[0] + "/rides")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := strings.Join(hits, ""); got != "120120" {
		t.Errorf("want attempts to go round the replicas, got %s", got)
	}
}

func TestEventLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newEventLog(&buf)
	for _, line := range []string{
		`api-1       | time=2026-01-01T00:00:00Z level=WARN msg="Faults: crashing" point=charge_answered`,
		`api-2       | time=2026-01-01T00:00:00Z level=WARN msg="Faults: crashing" point=finished`,
		`fakestripe  | time=2026-01-01T00:00:00Z level=INFO msg="Fakestripe: injecting fault" fault=charge_then_drop idempotency_key=k`,
		`completer   | time=2026-01-01T00:00:00Z level=INFO msg="Completer: pushed keys" num_succeeded=3 num_failed=0 num_skipped=1`,
		`worker-1    | time=2026-01-01T00:00:00Z level=INFO msg="Worker: sent receipt" ride_id=1`,
		`api-1       | time=2026-01-01T00:00:00Z level=INFO msg="API: request" method=POST path=/rides status=409 duration=8.51s remote_addr=x`,
		`api-1       | time=2026-01-01T00:00:00Z level=INFO msg="API: request" method=POST path=/rides status=409 duration=1.2ms remote_addr=x`,
	} {
		if _, err := l.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	c := l.counts()
	if c.selfCrashes["charge_answered"] != 1 || c.selfCrashes["finished"] != 1 || c.stripeFaults["charge_then_drop"] != 1 || c.completerFinished != 3 || c.fenced != 1 {
		t.Errorf("unexpected counts %+v", c)
	}
	if strings.Count(buf.String(), "\n") != 7 {
		t.Errorf("want every line written through, got:\n%s", buf.String())
	}
}

func TestLastWordsOfUnexpectedExits(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "chaos.log")
	log := strings.Join([]string{
		`enqueuer    | time=2026-01-01T00:00:00Z level=INFO msg="Enqueuer: enqueued jobs" num_enqueued=1`,
		`api-1       | time=2026-01-01T00:00:00Z level=INFO msg="API: request" status=201`,
		`api-1       | time=2026-01-01T00:00:00Z level=WARN msg="Faults: crashing" point=finished`,
		`chaos       | 00:00:00.100 api-1 exited by itself: signal: killed`,
		`enqueuer    | time=2026-01-01T00:00:01Z level=ERROR msg="Enqueuer: the last words"`,
		`api-2       | time=2026-01-01T00:00:01Z level=INFO msg="API: request" status=201`,
		`chaos       | 00:00:01.100 enqueuer exited by itself: exit status 1`,
		`chaos       | 00:00:01.200 fault api_sigkill: killed api-2`,
	}, "\n") + "\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := lastWordsOfUnexpectedExits(path, 20)
	want := "chaos       | 00:00:01.100 enqueuer exited by itself: exit status 1\n" +
		"enqueuer    | time=2026-01-01T00:00:00Z level=INFO msg=\"Enqueuer: enqueued jobs\" num_enqueued=1\n" +
		"enqueuer    | time=2026-01-01T00:00:01Z level=ERROR msg=\"Enqueuer: the last words\"\n"
	if got != want {
		t.Errorf("want the enqueuer's exit and its lines, not the API's crash:\n%s\ngot:\n%s", want, got)
	}
}
