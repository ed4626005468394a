package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/proctest"
)

// TestDev runs the README's run command as a user would: it waits for the banner, books a ride
// with the printed token, waits for the worker to log the receipt, reads the /metrics of every
// process where the banner says they are, stops everything with
// Ctrl-C (SIGINT) and checks that no process is left. With -data-dir it does so twice on one
// database, which must keep the first run's ride.
func TestDev(t *testing.T) {
	t.Parallel()
	dev := proctest.Build(t, "dev")
	tmp := t.TempDir()
	// As root, the server runs as the postgres user, which must be able to reach the directory.
	for _, dir := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(tmp, "postgres")

	var firstRideID, firstToken string
	for run := 1; run <= 2; run++ {
		port := proctest.FreePort(t)
		p := proctest.Start(t, dev, []string{fmt.Sprintf("PORT=%d", port)}, "-data-dir", dataDir)
		banner := proctest.WaitOutput(t, p, "RIDER=rr_", 3*time.Minute)
		token := regexp.MustCompile(`RIDER=(rr_\S+)`).FindStringSubmatch(banner)[1]

		book := func(run int, token string) (rideID string, replayed bool) {
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/rides", port),
				strings.NewReader("origin_lat=37.7749&origin_lon=-122.4194&target_lat=37.3382&target_lon=-121.8863"))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Idempotency-Key", fmt.Sprintf("dev-test-ride-%020d", run))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Ride struct{ ID string } }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("run %d: want 201 with a ride, got %d, %v\n%s", run, resp.StatusCode, err, p.Output())
			}
			return body.Ride.ID, resp.Header.Get("Idempotent-Replayed") == "true"
		}
		rideID, _ := book(run, token)
		proctest.WaitOutput(t, p, fmt.Sprintf(`msg="Worker: logged receipt, not sent (SMTP_URL unset)" ride_id=%s`, rideID), 30*time.Second)
		checkMetrics(t, p.Output())
		if run == 2 {
			// The database kept the first run's ride: its key, sent again, replays it.
			if firstAgain, replayed := book(1, firstToken); firstAgain != firstRideID || !replayed {
				t.Fatalf("want the first run's ride %s replayed, got ride %s (replayed %t)", firstRideID, firstAgain, replayed)
			}
		}
		if run == 1 {
			firstRideID, firstToken = rideID, token
		}

		// What dev runs now, and must stop: only this test's own processes, never another
		// dev stack on the machine.
		procs := descendants(t, p.Pid())
		checkRunsAll(t, procs, append([]string{"postgres", "fakestripe"}, services...)...)

		// Ctrl-C in a terminal signals the whole foreground process group.
		if err := p.SignalGroup(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("run %d: want exit 0 after Ctrl-C, got %d\n%s", run, code, p.Output())
		}
		checkNoneRunning(t, procs)
		// The services stopped before the database: none saw it go away.
		if out := p.Output(); strings.Contains(out, "57P01") || strings.Contains(out, "terminating connection") {
			t.Fatalf("run %d: the database stopped under a running service:\n%s", run, out)
		}
	}
}

// bannerMetrics matches a line of the banner that says where a process serves its metrics.
var bannerMetrics = regexp.MustCompile(`(?m)^  (api|worker|enqueuer|completer|reaper) +(http://127\.0\.0\.1:\d+/metrics)$`)

// checkMetrics checks that the banner in output lists a /metrics URL for every process, each its
// own, and that each answers with that process's series, after one ride.
func checkMetrics(t *testing.T, output string) {
	t.Helper()
	urls := map[string]string{}
	seen := map[string]bool{}
	for _, m := range bannerMetrics.FindAllStringSubmatch(output, -1) {
		if seen[m[2]] {
			t.Fatalf("the banner gives %s to two processes:\n%s", m[2], output)
		}
		urls[m[1]], seen[m[2]] = m[2], true
	}
	for _, name := range services {
		url, ok := urls[name]
		if !ok {
			t.Fatalf("the banner says nowhere where %s's metrics are:\n%s", name, output)
		}
		text := proctest.Scrape(t, url)
		if _, ok := proctest.MetricValue(text, "rocketrides_db_pool_max_conns"); !ok {
			t.Fatalf("want %s's metrics at %s to hold its pool's series, got:\n%s", name, url, text)
		}
		want := ownSeries[name]
		if got, ok := proctest.MetricValue(text, want.series); !ok || got < want.atLeast {
			t.Fatalf("want %s's metrics at %s to hold %s of at least %v, got %v (present %t)", name, url, want.series, want.atLeast, got, ok)
		}
	}
}

// ownSeries is a series of each process's own work, after the run's ride: the API created it,
// the enqueuer handed its receipt to River and the worker logged it (dev sets no SMTP_URL).
var ownSeries = map[string]struct {
	series  string
	atLeast float64
}{
	"api":       {`rocketrides_ride_requests_total{outcome="created"}`, 1},
	"worker":    {`rocketrides_receipts_total{result="logged"}`, 1},
	"enqueuer":  {`rocketrides_enqueued_jobs_total`, 1},
	"completer": {`rocketrides_completer_keys_total{result="succeeded"}`, 0},
	"reaper":    {`rocketrides_reaper_keys_total{result="finished"}`, 0},
}
