package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestCompareHA runs the HA comparison small: both targets book rides on the single node and on
// the formation, and the table gives each side's rides per second and the ratios.
func TestCompareHA(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster, a pg_auto_failover formation, the API and pgbench")
	}
	out := requireOK(t, "-compare-ha", "-rides", "0", "-clients", "2", "-duration", "2s")
	for _, target := range []string{targetTwoTx, targetAPI} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + ` rides/s\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no rides/s row for %s in:\n%s", target, out)
		}
		for i, side := range []string{"single node", "sync standby", "ratio"} {
			if v, _ := strconv.ParseFloat(m[i+1], 64); v <= 0 {
				t.Errorf("%s, %s: want more than 0, got %s", target, side, m[i+1])
			}
		}
	}
	if !regexp.MustCompile(`(?m)^API ÷ twotx rides/s\s+[0-9.]+\s+[0-9.]+`).MatchString(out) {
		t.Errorf("no API ÷ twotx row in:\n%s", out)
	}
}
