package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// walkthrough is the banner's commands, run one by one in a shell into which its export lines
// were pasted, so that a test can show that each does what the banner says, and that none is
// left that no test ran.
type walkthrough struct {
	sh       shell
	commands []string
	ran      []bool
	// binaries stand for `go run ./cmd/NAME`: the same command, built once by the test.
	binaries map[string]string
}

// bannerCommand matches the first line of a command in the banner: an indented line that starts
// with curl, go run, psql, or a variable set for the command.
var bannerCommand = regexp.MustCompile(`^ +(curl |go run |psql |[A-Z_]+=\S+ go run )`)

// newWalkthrough reads the commands of the banner in output, each with the lines it continues
// onto with a trailing backslash.
func newWalkthrough(t *testing.T, output string, binaries map[string]string) *walkthrough {
	t.Helper()
	_, text, ok := strings.Cut(output, "Rocket Rides is running.")
	if !ok {
		t.Fatalf("no banner in:\n%s", output)
	}
	text, _, _ = strings.Cut(text, "Ctrl-C stops everything.")
	w := &walkthrough{sh: bannerShell(t, output), binaries: binaries}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !bannerCommand.MatchString(lines[i]) {
			continue
		}
		command := strings.TrimSpace(lines[i])
		for strings.HasSuffix(command, `\`) && i+1 < len(lines) {
			i++
			command += "\n" + strings.TrimSpace(lines[i])
		}
		w.commands = append(w.commands, command)
	}
	w.ran = make([]bool, len(w.commands))
	return w
}

// command returns the one command of the banner that is or holds substr, with each of its placeholders
// (RIDE_ID, ...) replaced as replacements say in pairs, and `go run ./cmd/NAME` by the built
// binary. The command counts as run.
func (w *walkthrough) command(t *testing.T, substr string, replacements ...string) string {
	t.Helper()
	found := slices.Index(w.commands, substr) // a whole command names itself, whatever else holds it
	for i, c := range w.commands {
		if found >= 0 && w.commands[found] == substr || !strings.Contains(c, substr) {
			continue
		}
		if found >= 0 {
			t.Fatalf("two commands of the banner hold %q:\n%s\n%s", substr, w.commands[found], c)
		}
		found = i
	}
	if found < 0 {
		t.Fatalf("no command of the banner holds %q; its commands:\n%s", substr, strings.Join(w.commands, "\n"))
	}
	w.ran[found] = true
	command := strings.NewReplacer(replacements...).Replace(w.commands[found])
	for name, binary := range w.binaries {
		command = strings.ReplaceAll(command, "go run ./cmd/"+name, binary)
	}
	if strings.Contains(command, "go run ") {
		t.Fatalf("the test has no binary for %q", command)
	}
	return command
}

// requireAllRun fails the test if a command of the banner was never run.
func (w *walkthrough) requireAllRun(t *testing.T) {
	t.Helper()
	for i, c := range w.commands {
		if !w.ran[i] {
			t.Errorf("no test runs the banner's command:\n%s", c)
		}
	}
}

// curlResponse is what `curl` printed: with -i, the status and headers before the body.
type curlResponse struct {
	status int
	header http.Header
	body   string
}

// curl runs a curl command of the banner and reads what it printed.
func (w *walkthrough) curl(t *testing.T, command string) curlResponse {
	t.Helper()
	out := w.sh.output(t, command)
	r := curlResponse{header: http.Header{}, body: out}
	if strings.HasPrefix(out, "HTTP/") {
		head, body, ok := strings.Cut(out, "\r\n\r\n")
		if !ok {
			t.Fatalf("%s printed no headers: %q", command, out)
		}
		lines := strings.Split(head, "\r\n")
		fields := strings.Fields(lines[0])
		status, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatalf("%s printed the status line %q", command, lines[0])
		}
		for _, line := range lines[1:] {
			k, v, _ := strings.Cut(line, ":")
			r.header.Add(k, strings.TrimSpace(v))
		}
		r.status, r.body = status, body
	}
	// Every JSON answer ends in a newline, so that the prompt starts a line of its own.
	if !strings.HasSuffix(r.body, "}\n") {
		t.Fatalf("%s: want a JSON answer ending in a newline, got %q", command, r.body)
	}
	return r
}

// require checks the response's status and decodes its body into v.
func (r curlResponse) require(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("want %d, got %d: %s", status, r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("error decoding %s: %v", r.body, err)
	}
}

// bannerRide is a ride as the banner's commands print it.
type bannerRide struct {
	ID             string    `json:"id"`
	StripeChargeID string    `json:"stripe_charge_id"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
}

// getRide runs the banner's GET /rides/RIDE_ID for id, as the rider whose token variable is
// token, and returns the status and the ride.
func (w *walkthrough) getRide(t *testing.T, id, token string) (int, bannerRide) {
	t.Helper()
	r := w.curl(t, w.command(t, `/rides/RIDE_ID" `, "RIDE_ID", id, "$RIDER", token))
	var got struct{ Ride bannerRide }
	if r.status == http.StatusOK {
		r.require(t, http.StatusOK, &got)
	}
	return r.status, got.Ride
}

// followBanner runs every command of dev's banner but the -ha ones, in order, and checks that
// each does what the banner says; ownRides are the rider's rides that the test booked itself.
// The rider's bookings, replays and cancels stay within the default budgets (TestDev checks that
// none was refused for a limit).
func followBanner(t *testing.T, p *proctest.Process, w *walkthrough, metricsURLs map[string]string, ownRides ...string) {
	t.Helper()
	var created struct{ Ride bannerRide }

	// Book a ride; the same command again replays it, and Stripe holds one charge.
	book := w.command(t, "my-first-ride-0000000001")
	first := w.curl(t, book)
	first.require(t, http.StatusCreated, &created)
	again := w.curl(t, book)
	if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "true" || again.body != first.body {
		t.Fatalf("want the first answer replayed, got %d (replayed %q): %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	firstRide := created.Ride
	var charges struct {
		Charges []struct{ Metadata map[string]string }
	}
	if err := json.Unmarshal([]byte(w.sh.output(t, `curl -s "$STRIPE_API_URL/_fakestripe/charges"`)), &charges); err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(charges.Charges, func(c struct{ Metadata map[string]string }) bool {
		return c.Metadata["idempotency_key"] != "my-first-ride-0000000001"
	})); n != 1 {
		t.Fatalf("want Stripe to hold one charge for the first ride, got %d", n)
	}

	// A declined card: 402 card_declined, replayed when sent again.
	declined := w.command(t, "declined-ride-0000000001")
	for try := range 2 {
		r := w.curl(t, declined)
		var p struct{ Code string }
		r.require(t, http.StatusPaymentRequired, &p)
		if p.Code != "card_declined" || (try == 1) != (r.header.Get("Idempotent-Replayed") == "true") {
			t.Fatalf("try %d: want card_declined (replayed %t), got %s (replayed %q)", try, try == 1, r.body, r.header.Get("Idempotent-Replayed"))
		}
	}

	// raise_error: a 500 that the completer finishes, after which the same command replays
	// the 201.
	flaky := w.command(t, "raise_error=true")
	var p500 struct{ Code string }
	w.curl(t, flaky).require(t, http.StatusInternalServerError, &p500)
	if p500.Code != "internal_error" {
		t.Fatalf("want raise_error's 500 internal_error, got %s", p500.Code)
	}
	proctest.WaitMetrics(t, p, metricsURLs["completer"], map[string]float64{`rocketrides_completer_keys_total{result="succeeded"}`: 1}, time.Minute)
	finished := w.curl(t, flaky)
	finished.require(t, http.StatusCreated, &created)
	if finished.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("want the completed request's 201 replayed, got %v", finished.header)
	}
	flakyRide := created.Ride

	// The client books, and says so in its exit status.
	var booked struct {
		Outcome string
		Ride    bannerRide
	}
	if err := json.Unmarshal([]byte(w.sh.output(t, w.command(t, "go run ./cmd/rides"))), &booked); err != nil || booked.Outcome != "booked" {
		t.Fatalf("want the client to book, got %+v (%v)", booked, err)
	}

	// The rider's rides a page at a time: the pages together hold every ride, newest first,
	// each once.
	var page struct {
		Data    []bannerRide
		HasMore bool `json:"has_more"`
	}
	w.curl(t, w.command(t, `/rides?limit=2"`)).require(t, http.StatusOK, &page)
	if len(page.Data) != 2 || !page.HasMore {
		t.Fatalf("want a first page of 2 rides and more to come, got %+v", page)
	}
	listed := page.Data
	for page.HasMore && len(listed) < 100 {
		last := page.Data[len(page.Data)-1].ID
		page.Data, page.HasMore = nil, false
		w.curl(t, w.command(t, "starting_after=LAST_ID", "LAST_ID", last)).require(t, http.StatusOK, &page)
		listed = append(listed, page.Data...)
	}
	seen := map[string]bool{}
	for i, r := range listed {
		if seen[r.ID] || (i > 0 && r.CreatedAt.After(listed[i-1].CreatedAt)) {
			t.Fatalf("want each ride once, newest first, got %+v", listed)
		}
		seen[r.ID] = true
	}
	for _, id := range append([]string{firstRide.ID, flakyRide.ID, booked.Ride.ID}, ownRides...) {
		if !seen[id] {
			t.Fatalf("want ride %s among the pages, got %+v", id, listed)
		}
	}

	// One ride: the rider's own, and no other rider's.
	if status, ride := w.getRide(t, firstRide.ID, "$RIDER"); status != http.StatusOK || ride.ID != firstRide.ID {
		t.Fatalf("want ride %s, got %d %+v", firstRide.ID, status, ride)
	}
	if status, _ := w.getRide(t, firstRide.ID, "$DECLINED"); status != http.StatusNotFound {
		t.Fatalf("want another rider's ride to be 404, got %d", status)
	}

	// Cancel the first ride: refunded once however often the command is sent; another key is 409.
	cancel := w.command(t, "my-first-cancel-", "RIDE_ID", firstRide.ID)
	for try := range 2 {
		r := w.curl(t, cancel)
		var c struct{ Ride bannerRide }
		r.require(t, http.StatusOK, &c)
		if c.Ride.ID != firstRide.ID || c.Ride.Status != "cancelled" || (try == 1) != (r.header.Get("Idempotent-Replayed") == "true") {
			t.Fatalf("try %d: want ride %s cancelled (replayed %t), got %s", try, firstRide.ID, try == 1, r.body)
		}
	}
	var refunds struct{ Refunds []json.RawMessage }
	if err := json.Unmarshal([]byte(w.sh.output(t, `curl -s "$STRIPE_API_URL/_fakestripe/refunds?charge=`+firstRide.StripeChargeID+`"`)), &refunds); err != nil || len(refunds.Refunds) != 1 {
		t.Fatalf("want one refund of %s, got %+v (%v)", firstRide.StripeChargeID, refunds, err)
	}
	var conflict struct{ Code string }
	w.curl(t, strings.ReplaceAll(cancel, "my-first-cancel-", "my-other-cancel-")).require(t, http.StatusConflict, &conflict)
	if conflict.Code != "ride_already_cancelled" {
		t.Fatalf("want ride_already_cancelled, got %s", conflict.Code)
	}

	// A refund at the stand-in's dashboard arrives as a webhook: the API's log says so, and the
	// ride shows it.
	if out := w.sh.output(t, w.command(t, "/refund", "CHARGE_ID", flakyRide.StripeChargeID)); !strings.Contains(out, flakyRide.StripeChargeID) {
		t.Fatalf("want the stand-in to refund %s, got %s", flakyRide.StripeChargeID, out)
	}
	waitLog(t, p, `msg="API: Stripe event received" .*type=charge.refunded .*ride_id=`+flakyRide.ID+`\b`)
	if _, ride := w.getRide(t, flakyRide.ID, "$RIDER"); ride.Status != "refunded" {
		t.Fatalf("want ride %s refunded, got %+v", flakyRide.ID, ride)
	}

	// A dispute: the same way, and admin lists the ride.
	if out := w.sh.output(t, w.command(t, "/dispute", "CHARGE_ID", booked.Ride.StripeChargeID)); !strings.Contains(out, booked.Ride.StripeChargeID) {
		t.Fatalf("want the stand-in to dispute %s, got %s", booked.Ride.StripeChargeID, out)
	}
	waitLog(t, p, `msg="API: Stripe event received" .*type=charge.dispute.created .*ride_id=`+booked.Ride.ID+`\b`)
	if _, ride := w.getRide(t, booked.Ride.ID, "$RIDER"); ride.Status != "disputed" {
		t.Fatalf("want ride %s disputed, got %+v", booked.Ride.ID, ride)
	}
	if out := w.sh.output(t, w.command(t, "go run ./cmd/admin list-disputed")); !strings.Contains(out, booked.Ride.ID+" ") {
		t.Fatalf("want admin to list ride %s as disputed, got:\n%s", booked.Ride.ID, out)
	}

	// Nothing of the walkthrough was refused for a limit, on the default limits: neither a 429
	// answered to a curl, which a status check above would have caught, nor one that the
	// client met and retried, which only the API's count shows.
	if limited := sumSeries(proctest.Scrape(t, metricsURLs["api"]), "rocketrides_rate_limited_total"); limited != 0 {
		t.Errorf("want no request of the walkthrough refused for a limit, got rocketrides_rate_limited_total %v", limited)
	}

	// The simulator, bounded to 2 rides for the test: each booked, or, when it asked for
	// raise_error, given up on for the completer to finish.
	out := w.sh.output(t, w.command(t, "SIMULATE_ERRORS=true go run ./cmd/simulator")+" -rides 2 -riders 2 -interval 10ms")
	if booked, gaveUp := strings.Count(out, "Simulator: ride booked"), strings.Count(out, "raise_error=true"); booked+gaveUp != 2 || strings.Contains(out, "level=ERROR") {
		t.Fatalf("want the simulator's 2 rides booked or given up on by raise_error, got:\n%s", out)
	}
}

// waitLog waits up to a minute for a line of p's output that matches pattern.
func waitLog(t *testing.T, p *proctest.Process, pattern string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)` + pattern)
	for deadline := time.Now().Add(time.Minute); !re.MatchString(p.Output()); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s in:\n%s", pattern, p.Output())
		}
	}
}

// watchFailover runs dev -ha's failover as the banner says: the simulator books in a terminal of
// its own while the monitor is asked to promote the standby. The query under "Database" must
// show the nodes swapped, and the simulator must go on booking, no ride of it refused, given up
// or failed.
func watchFailover(t *testing.T, w *walkthrough) {
	t.Helper()
	which := w.command(t, "SELECT nodename, reportedstate FROM pgautofailover.node")
	before := nodeStates(t, w.sh.output(t, which))
	primary := ""
	for name, state := range before {
		if state == "primary" {
			primary = name
		}
	}
	if len(before) != 2 || primary == "" {
		t.Fatalf("want a primary and its standby, got %v", before)
	}

	simulator := proctest.Start(t, "sh", nil, "-c", w.sh.exports+"\nexec "+w.command(t, "go run ./cmd/simulator"))
	proctest.WaitOutput(t, simulator, "Simulator: ride booked", 2*time.Minute)
	w.sh.output(t, w.command(t, "pgautofailover.perform_failover"))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		after := nodeStates(t, w.sh.output(t, which))
		if after[primary] == "secondary" && slices.Contains(slices.Collect(maps.Values(after)), "primary") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the nodes swapped after the failover, the old primary %s a secondary, got %v", primary, after)
		}
	}
	// The API rides through: rides booked after the swap, none lost on the way.
	bookedAtSwap := strings.Count(simulator.Output(), "Simulator: ride booked")
	for deadline := time.Now().Add(2 * time.Minute); strings.Count(simulator.Output(), "Simulator: ride booked") < bookedAtSwap+3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("want the simulator to go on booking after the failover:\n%s", simulator.Output())
		}
	}
	if err := simulator.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := simulator.Wait(t, 45*time.Second); code != 0 {
		t.Fatalf("want the simulator to stop with 0 on Ctrl-C, got %d:\n%s", code, simulator.Output())
	}
	for _, bad := range []string{"Simulator: ride refused", "Simulator: gave up", "Simulator: ride failed", "level=ERROR"} {
		if strings.Contains(simulator.Output(), bad) {
			t.Fatalf("want every ride booked through the failover, got %q:\n%s", bad, simulator.Output())
		}
	}
	t.Logf("the simulator booked %d rides, %d of them after the swap", strings.Count(simulator.Output(), "Simulator: ride booked"),
		strings.Count(simulator.Output(), "Simulator: ride booked")-bookedAtSwap)
}

// nodeStates reads psql's table of the monitor's nodes: each node's reported state by name.
func nodeStates(t *testing.T, table string) map[string]string {
	t.Helper()
	states := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		name, state, ok := strings.Cut(line, "|")
		if name, state = strings.TrimSpace(name), strings.TrimSpace(state); ok && name != "nodename" {
			states[name] = state
		}
	}
	return states
}

// sumSeries is the sum of every series of metric in a scrape, whatever its labels; 0 if it has
// none.
func sumSeries(text, metric string) float64 {
	var sum float64
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
