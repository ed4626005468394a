package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/workers"
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
	// Four minutes, and River's rescue of a receipt job a killed worker left running at the end.
	sum := runSoak(t, 4*time.Minute+workers.ReceiptRescueBound, "-duration", "40s", "-clients", "8")
	// On a loaded 2-core machine a healthy soak books several hundred rides; 100 means
	// the service was mostly down, which the faults should never achieve.
	if sum.Requests < 100 || sum.KeysCreated < 50 {
		t.Errorf("want at least 100 requests and 50 rides booked, got %d and %d", sum.Requests, sum.KeysCreated)
	}
	// None is left to chance: the schedule holds every kind, and the first API crashes itself
	// for certain on its first booking that reaches the first of forcedCrashPoints, then on its
	// first cancel that reaches the second: Stripe refunded, and nothing recorded it.
	for _, point := range forcedCrashPoints {
		if sum.SelfCrashesByPoint[string(point)] == 0 {
			t.Errorf("want the forced crash at %s, got self-crashes %v", point, sum.SelfCrashesByPoint)
		}
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
	// One ride in ten is cancelled; the webhook hears of every refund, ours and the dashboard's,
	// and of every dispute.
	if sum.KeysCancelled == 0 || sum.CancelledRides != sum.KeysCancelled || sum.RefundReceipts != sum.KeysCancelled {
		t.Errorf("want rides cancelled, each with its refund receipt: %d cancels, %d cancelled rides, %d refund receipts",
			sum.KeysCancelled, sum.CancelledRides, sum.RefundReceipts)
	}
	if sum.Faults[string(faultDashboardRefund)]+sum.Faults[string(faultDispute)] == 0 || sum.StripeEvents == 0 {
		t.Errorf("want refunds from the dashboard or disputes, and the webhook to apply Stripe's events, got %v and %d events",
			sum.Faults, sum.StripeEvents)
	}
	// chaos fails on these itself; the test holds the summary to them as well, so that a
	// change to what chaos counts as a failure cannot quietly let them through.
	if len(sum.ForReview) > 0 {
		t.Errorf("want no request set aside for review, got %q", sum.ForReview)
	}
	if sum.Emails != sum.Receipts+sum.RefundReceipts+sum.DuplicateEmails {
		t.Errorf("want every email a recorded receipt, refund receipt or a copy of one: %d emails, %d receipts, %d refund receipts, %d copies",
			sum.Emails, sum.Receipts, sum.RefundReceipts, sum.DuplicateEmails)
	}
	// Its outages are all shorter than the worker's record timeout: the contract allows one
	// copy, for a machine that stretches one, and one for each job a killed worker left running.
	if sum.DuplicateBound != 1+sum.ReceiptJobsRescued || sum.DuplicateEmails > sum.DuplicateBound {
		t.Errorf("want at most %d copies of receipts mailed, got %d of %d allowed: %s",
			1+sum.ReceiptJobsRescued, sum.DuplicateEmails, sum.DuplicateBound, firstFew(sum.Duplicates, 5))
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

// TestSoakFailover runs the soak on a highly available database, a pg_auto_failover primary and
// its synchronous standby, whose primary is lost five times while clients book rides: its
// machine killed, and frozen, in turn. Every invariant must hold as in TestSoak, with no 500 to
// any attempt, no process exiting by itself, and each receipt recorded once and mailed within
// the receipt contract: once, unless a failover outlasted the worker's record timeout, which a
// loaded machine can stretch one to (a CI run saw one copy after a failover of 10.0 s). Every
// receipt is mailed within workers.ReceiptRescueBound of its staging plus the outages: a job a
// failover left running is River's rescuer's, and one left for River's default hour is never
// mailed within the soak.
func TestSoakFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes about two minutes")
	}
	// Beside TestSoak: nothing here bounds a time that the other soak's load stretches.
	t.Parallel()
	sum := runSoak(t, 7*time.Minute+workers.ReceiptRescueBound, "-ha", "-duration", "75s", "-db-restarts", "5", "-clients", "8")

	if sum.Faults[string(faultFailoverKill)] < 2 || sum.Faults[string(faultFailoverFreeze)] < 2 ||
		len(sum.Unavailable) != 5 {
		t.Errorf("want 5 failovers, the primary killed and frozen in turn, got %v, unavailable for %v", sum.Faults, sum.Unavailable)
	}
	if n := sum.AnswersByStatus["500"]; n > 0 {
		t.Errorf("want no 500, got %d", n)
	}
	if sum.Receipts != sum.KeysCreated || sum.RefundReceipts != sum.KeysCancelled || sum.DuplicateEmails > sum.DuplicateBound {
		t.Errorf("want one receipt for each of the %d rides and one refund receipt for each of the %d cancels, and at most %d copies; got %d, %d and %d copies",
			sum.KeysCreated, sum.KeysCancelled, sum.DuplicateBound, sum.Receipts, sum.RefundReceipts, sum.DuplicateEmails)
	}
	if sum.KeysCreated < 100 {
		t.Errorf("want at least 100 rides booked through the failovers, got %d", sum.KeysCreated)
	}
	// The monitor's tuned timing (hacluster.TunedSettings) promises a failover in seconds; the
	// figures are logged, not bounded, as load stretches them. Each failover waited for a ride
	// booked after it (failoverWait), which a stack that never recovered would not have.
	t.Logf("seconds from the primary's loss to the first ride booked: %v; %d receipt jobs rescued by River, the longest receipt %.1f s",
		sum.Unavailable, sum.ReceiptJobsRescued, sum.ReceiptDelayMax)
}

// soakStopGrace is how long an interrupted chaos has to stop its stack (every process, the
// database or the pg_auto_failover formation) and print what it found before it is killed: a
// killed chaos leaves its formation running and reports nothing.
const soakStopGrace = 2 * time.Minute

// runSoak runs the chaos binary with args, and returns its summary once it found every
// invariant held, with no failure and no data race in any process. A chaos that is still running
// after timeout (or so near go test's own -timeout that it could not stop in time) is told to
// stop, as an operator's Ctrl-C does: it stops its stack and reports, and the test fails with
// that report. Its log is kept, and its path printed, whenever the test fails.
func runSoak(t *testing.T, timeout time.Duration, args ...string) *summary {
	t.Helper()
	bin := proctest.BuildPackage(t, "./lab/chaos")
	seed := uint64(time.Now().UnixNano())
	dir, err := os.MkdirTemp("", "rocketrides-chaos-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the soak's log and summary are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir) // a temporary directory; the OS cleans it up eventually
	})
	summaryPath := filepath.Join(dir, "summary.json")
	logPath := filepath.Join(dir, "chaos.log")
	if deadline, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline)-soakStopGrace-30*time.Second)
	}
	t.Logf("seed %d, at most %s; log in %s", seed, timeout.Round(time.Second), logPath)

	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	args = append(args, "-seed", strconv.FormatUint(seed, 10), "-log", logPath, "-summary-json", summaryPath)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "." // inside the module, where chaos finds the commands to build
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = soakStopGrace
	// Should this test binary die first (go test's -timeout), chaos is told to stop all the same.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	err = cmd.Run()
	t.Logf("chaos output:\n%s", out.String())
	for _, report := range race.Reports(out.String()) {
		t.Errorf("chaos reported a data race:\n%s", report)
	}
	if err != nil {
		t.Logf("tail of the processes' log:\n%s", tail(logPath, 80))
		if last := lastWordsOfUnexpectedExits(logPath, 20); last != "" {
			t.Logf("the last lines of processes that exited by themselves, other than APIs' crashes:\n%s", last)
		}
		if ctx.Err() != nil {
			t.Fatalf("chaos did not finish within %s and was told to stop; it ended after %s: %v",
				timeout.Round(time.Second), time.Since(started).Round(time.Second), err)
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
		t.Fatalf("want the invariants checked, with no violations and no failures; got checked=%t, %q and %q",
			sum.Checked, sum.Violations, sum.Failures)
	}
	return &sum
}
