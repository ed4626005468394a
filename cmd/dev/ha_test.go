package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestDevHA runs dev -ha as docs/high-availability.md says: the stack on a pg_auto_failover
// formation, a primary and its synchronous standby, whose multi-host DATABASE_URL the banner
// gives. The banner's failover is run as it says (watchFailover), a ride books through it, and
// Ctrl-C stops every process, the formation's included.
// With -data-dir it does so twice on one kept formation: the second run finds the first's ride,
// whose request replays.
func TestDevHA(t *testing.T) {
	t.Parallel()
	dev, simulator := proctest.Build(t, "dev"), proctest.Build(t, "simulator")
	dataDir := filepath.Join(reachableTempDir(t), "state")

	var firstToken string
	for run := 1; run <= 2; run++ {
		port := proctest.FreePort(t)
		p := proctest.Start(t, dev, []string{fmt.Sprintf("PORT=%d", port)}, "-ha", "-data-dir", dataDir)
		proctest.WaitOutput(t, p, "Ctrl-C stops everything", 3*time.Minute)
		sh := bannerShell(t, p.Output())
		if url := sh.output(t, `printf %s "$DATABASE_URL"`); !strings.Contains(url, ",") || !strings.Contains(url, "target_session_attrs=read-write") {
			t.Fatalf("want the banner's DATABASE_URL to name both nodes and ask for the one that takes writes, got %q", url)
		}
		if run == 1 {
			firstToken = sh.output(t, `printf %s "$RIDER"`)
			watchFailover(t, newWalkthrough(t, p.Output(), map[string]string{"simulator": simulator}))
		}

		// The first run books the ride; the second, on the kept formation, replays it for the
		// first run's rider.
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/rides", port),
			strings.NewReader("origin_lat=37.7749&origin_lon=-122.4194&target_lat=37.3382&target_lon=-121.8863"))
		req.Header.Set("Authorization", "Bearer "+firstToken)
		req.Header.Set("Idempotency-Key", "dev-ha-test-ride-0000000001")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if replayed := resp.Header.Get("Idempotent-Replayed") == "true"; resp.StatusCode != http.StatusCreated || replayed != (run == 2) {
			t.Fatalf("run %d: want 201 (replayed %t), got %d (replayed %t): %s", run, run == 2, resp.StatusCode, replayed, body)
		}

		procs := proctest.Descendants(t, p.Pid())
		proctest.CheckRunsAll(t, procs, append([]string{"pg_autoctl", "postgres", "fakestripe", "admin"}, services...)...)
		if err := p.SignalGroup(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, time.Minute); code != 0 {
			t.Fatalf("run %d: want exit 0 after Ctrl-C, got %d\n%s", run, code, p.Output())
		}
		proctest.CheckNoneRunning(t, procs)
	}
}
