package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestDev runs the README's run command as a user would: it waits for the banner, books a ride
// with the printed token, waits for the worker to log the receipt, reads the /metrics of every
// process where the banner says they are, runs admin and the client in a shell with the
// banner's export lines, follows the banner's demos to their end (the raise_error one finished
// by the completer), stops everything with Ctrl-C (SIGINT) and checks that none of its processes
// is left. With -data-dir it does so twice on one kept state, which must keep the first run's
// ride, and its rider, who books again with the first run's token.
func TestDev(t *testing.T) {
	t.Parallel()
	dev, admin, rides, simulator := proctest.Build(t, "dev"), proctest.Build(t, "admin"), proctest.Build(t, "rides"), proctest.Build(t, "simulator")
	dataDir := filepath.Join(reachableTempDir(t), "state")

	var firstRideID, firstToken string
	for run := 1; run <= 2; run++ {
		port := proctest.FreePort(t)
		p := proctest.Start(t, dev, []string{
			fmt.Sprintf("PORT=%d", port),
			// The completer takes abandoned requests on at once rather than after 5 minutes, so
			// that the test sees it finish the banner's raise_error request.
			"COMPLETER_MIN_AGE=1s", "COMPLETER_IDLE_FOR=1s", "COMPLETER_INTERVAL=1s",
		}, "-data-dir", dataDir)
		proctest.WaitOutput(t, p, "Ctrl-C stops everything", 3*time.Minute)
		sh := bannerShell(t, p.Output())
		token := sh.output(t, `printf %s "$RIDER"`)

		// book sends ride request n of the test (its Idempotency-Key) with token.
		book := func(n int, token string, extra ...string) (resp *http.Response, body []byte) {
			t.Helper()
			form := append([]string{"origin_lat=37.7749&origin_lon=-122.4194&target_lat=37.3382&target_lon=-121.8863"}, extra...)
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/rides", port), strings.NewReader(strings.Join(form, "&")))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Idempotency-Key", fmt.Sprintf("dev-test-ride-%020d", n))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err = io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp, body
		}
		bookRide := func(n int, token string) (rideID string, replayed bool) {
			t.Helper()
			resp, body := book(n, token)
			var ride struct{ Ride struct{ ID string } }
			if err := json.Unmarshal(body, &ride); err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("run %d, request %d: want 201 with a ride, got %d, %v: %s\n%s", run, n, resp.StatusCode, err, body, p.Output())
			}
			return ride.Ride.ID, resp.Header.Get("Idempotent-Replayed") == "true"
		}
		rideID, _ := bookRide(run, token)
		proctest.WaitOutput(t, p, fmt.Sprintf(`msg="Worker: logged receipt, not sent (SMTP_URL unset)" ride_id=%s`, rideID), 30*time.Second)
		metricsURLs := checkMetrics(t, p.Output())

		if run == 1 {
			checkBannerShell(t, sh, admin, rides, simulator)

			// The banner's raise_error demo: a 500 that the completer finishes, after which the
			// same request replays the 201.
			const flaky = 1_000_000
			if resp, body := book(flaky, token, "raise_error=true"); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"code":"internal_error"`) {
				t.Fatalf("want raise_error's 500 internal_error, got %d: %s", resp.StatusCode, body)
			}
			proctest.WaitMetrics(t, p, metricsURLs["completer"], map[string]float64{`rocketrides_completer_keys_total{result="succeeded"}`: 1}, time.Minute)
			if resp, body := book(flaky, token, "raise_error=true"); resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("want the completed request's 201 replayed, got %d (replayed %q): %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
			}
			firstRideID, firstToken = rideID, token
		}
		if run == 2 {
			// The kept state kept the first run's ride: its key, sent again, replays it.
			if firstAgain, replayed := bookRide(1, firstToken); firstAgain != firstRideID || !replayed {
				t.Fatalf("want the first run's ride %s replayed, got ride %s (replayed %t)", firstRideID, firstAgain, replayed)
			}
			// And its rider: the Stripe stand-in kept their customer, so a new ride is booked
			// with the first run's token, not refused with "No such customer".
			if newRide, replayed := bookRide(3, firstToken); newRide == firstRideID || replayed {
				t.Fatalf("want a new ride for the first run's rider, got ride %s (replayed %t)", newRide, replayed)
			}
		}

		// What dev runs now, and must stop: only this test's own processes, never another
		// dev stack on the machine.
		procs := proctest.Descendants(t, p.Pid())
		proctest.CheckRunsAll(t, procs, append([]string{"postgres", "fakestripe"}, services...)...)

		// Ctrl-C in a terminal signals the whole foreground process group.
		if err := p.SignalGroup(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("run %d: want exit 0 after Ctrl-C, got %d\n%s", run, code, p.Output())
		}
		proctest.CheckNoneRunning(t, procs)
		// The services stopped before the database: none saw it go away.
		if out := p.Output(); strings.Contains(out, "57P01") || strings.Contains(out, "terminating connection") {
			t.Fatalf("run %d: the database stopped under a running service:\n%s", run, out)
		}
	}
}

// reachableTempDir is a temporary directory that the postgres user can reach: as root, the
// server runs as that user.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	for _, dir := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// shell is a shell into which the banner's export lines were pasted.
type shell struct{ exports string }

// bannerShell finds the banner's export lines, which must set what admin, the simulator and
// the client need.
func bannerShell(t *testing.T, output string) shell {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(output, "\n") {
		if strings.HasPrefix(line, "  export ") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	sh := shell{exports: strings.Join(lines, "\n")}
	for _, name := range []string{"DATABASE_URL", "STRIPE_API_KEY", "STRIPE_API_URL", "API_URL", "RIDER", "DECLINED"} {
		if value := sh.output(t, fmt.Sprintf(`printf %%s "$%s"`, name)); value == "" {
			t.Fatalf("want the banner's export lines to set %s, got:\n%s", name, sh.exports)
		}
	}
	return sh
}

// run runs command in the shell, in an environment that holds nothing else of the test's, and
// returns its stdout and exit code.
func (sh shell) run(t *testing.T, command string) (stdout string, code int) {
	t.Helper()
	stdout, stderr, code := proctest.Run(t, "sh", nil, "-c", sh.exports+"\n"+command)
	if stderr != "" {
		t.Logf("%s: %s", command, stderr)
	}
	return stdout, code
}

// output is run's stdout, for a command that must succeed.
func (sh shell) output(t *testing.T, command string) string {
	t.Helper()
	stdout, code := sh.run(t, command)
	if code != 0 {
		t.Fatalf("%s exited %d after the export lines:\n%s", command, code, sh.exports)
	}
	return stdout
}

// checkBannerShell checks the banner's export lines by what they are for: admin makes a rider
// with a card at the Stripe stand-in (DATABASE_URL, STRIPE_API_KEY, STRIPE_API_URL), the client
// books that rider a ride and is refused one for the declined rider (API_URL, DECLINED), telling
// the two apart by its exit status, and the simulator makes riders of its own and books their
// rides (all of them).
func checkBannerShell(t *testing.T, sh shell, admin, rides, simulator string) {
	t.Helper()
	out := sh.output(t, admin+" create-user -email exported@rocketrides.example -card tok_visa")
	var created struct{ Token string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Token == "" {
		t.Fatalf("create-user printed %q: %v", out, err)
	}
	for _, c := range []struct {
		token, outcome string
		code           int
	}{
		{created.Token, `"outcome":"booked"`, 0},
		{`"$DECLINED"`, `"code":"card_declined"`, 1},
	} {
		out, code := sh.run(t, rides+" -token "+c.token+" -from 37.7749,-122.4194 -to 37.3382,-121.8863")
		if code != c.code || !strings.Contains(out, c.outcome) {
			t.Fatalf("rides -token %s: want exit %d and %s, got %d: %s", c.token, c.code, c.outcome, code, out)
		}
	}
	if out := sh.output(t, simulator+" -rides 2 -riders 2 -interval 10ms"); strings.Count(out, "Simulator: ride booked") != 2 {
		t.Fatalf("want the simulator to book its 2 rides, got:\n%s", out)
	}
}

// bannerMetrics matches a line of the banner that says where a process serves its metrics.
var bannerMetrics = regexp.MustCompile(`(?m)^  (api|worker|enqueuer|completer|reaper) +(http://127\.0\.0\.1:\d+/metrics)$`)

// checkMetrics checks that the banner in output lists a /metrics URL for every process, each its
// own, and that each answers with that process's series, after one ride. It returns the URLs by
// process.
func checkMetrics(t *testing.T, output string) map[string]string {
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
	return urls
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
