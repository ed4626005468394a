package main

import (
	"encoding/json"
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

// TestDev runs the README's run command as a user would: it waits for the banner, books a ride
// with the printed token, waits for the worker to log the receipt, reads the /metrics of every
// process where the banner says they are, runs admin and the client in a shell with the
// banner's export lines, reads River's UI where the banner says it is and finds the ride's
// receipt job there, runs every command of the banner on the default limits and checks it
// does what the banner says, none refused for a limit (followBanner), stops everything with
// Ctrl-C (SIGINT) and checks that none of its processes is left. With -data-dir it does so twice
// on one kept state, which must keep the first run's ride, and its rider, who books again with
// the first run's token.
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
		// The banner says localhost, and a demo stack (SIMULATE_ERRORS) is for this machine alone.
		if want := fmt.Sprintf(`msg="API: listening" addr=127.0.0.1:%d`, port); !strings.Contains(p.Output(), want) {
			t.Fatalf("want the API listening on loopback only (%s), got:\n%s", want, p.Output())
		}
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
		checkUI(t, p.Output(), rideID)

		if run == 1 {
			checkBannerShell(t, sh, admin, rides, simulator)
			w := newWalkthrough(t, p.Output(), map[string]string{"rides": rides, "admin": admin, "simulator": simulator})
			followBanner(t, p, w, metricsURLs, rideID)
			w.requireAllRun(t)
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
		proctest.CheckRunsAll(t, procs, append([]string{"postgres", "fakestripe", "admin"}, services...)...)

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
