package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

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

// bannerUI matches the banner's line that says where River's UI is.
var bannerUI = regexp.MustCompile(`(?m)^  River's UI +(http://127\.0\.0\.1:\d+/) `)

// checkUI checks that River's UI answers where the banner says, with no login (dev runs it on
// loopback), and lists the receipt job of the ride rideID among the jobs the worker completed.
func checkUI(t *testing.T, output, rideID string) {
	t.Helper()
	m := bannerUI.FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("the banner says nowhere where River's UI is:\n%s", output)
	}
	status, body := proctest.Get(t, m[1]+"api/jobs?state=completed")
	if status != http.StatusOK || !strings.Contains(body, `\"ride_id\": \"`+rideID+`\"`) {
		t.Fatalf("want River's UI at %s to list the receipt job of ride %s, got %d: %s", m[1], rideID, status, body)
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
