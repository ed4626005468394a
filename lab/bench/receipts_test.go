package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestReceipts runs the receipt measurement small. It checks that every figure is there, not
// what it is: timings on a shared machine are for reading, not for asserting.
//
// Not parallel: it runs before the parallel tests are released, so that its five processes do
// not share the machine with TestCompare, whose commits per ride over runs of a second come out
// high when another stack slows the runs down.
func TestReceipts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and the Procfile's processes")
	}
	out := requireOK(t, "-receipts", "-bookings", "5", "-idle", "3s")

	t.Run("EveryStageOfEveryReceipt", func(t *testing.T) {
		for _, stage := range receiptStages {
			m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(stage.label) + `\s+(-?[0-9.]+) ms\s+(-?[0-9.]+) ms\s+(-?[0-9.]+) ms\s*$`).
				FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no row %q in:\n%s", stage.label, out)
			}
		}
		// The whole way takes time; its stages, read off other clocks, are only printed.
		m := regexp.MustCompile(`(?m)^\s*201 -> mail server\s+([0-9.]+) ms`).FindStringSubmatch(out)
		if p50, _ := strconv.ParseFloat(m[1], 64); p50 <= 0 {
			t.Errorf("want a positive p50 from the 201 to the mail server, got %s", m[1])
		}
	})

	t.Run("IdleCostOfEveryProcess", func(t *testing.T) {
		for _, process := range stackProcesses {
			m := regexp.MustCompile(`(?m)^\s*` + process + `\s+([0-9.]+)\s+([0-9.]+)\s*$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no idle row for %s in:\n%s", process, out)
			}
			// The enqueuer and the worker poll every second by default: over 3 s each sent
			// something.
			if n, _ := strconv.ParseFloat(m[1], 64); (process == "enqueuer" || process == "worker") && n == 0 {
				t.Errorf("want the %s's polls counted, got %s statements/s", process, m[1])
			}
		}
		if !regexp.MustCompile(`(?m)^\s*commits/s \(pg_stat_database\)\s+[0-9.]+`).MatchString(out) {
			t.Fatalf("no commits/s in:\n%s", out)
		}
	})
}
