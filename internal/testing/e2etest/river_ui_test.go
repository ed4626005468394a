package e2etest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/browsertest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

// The UI's login in this test, and a webhook secret the UI's environment holds, which no page may show.
const (
	uiUsername    = "ops"
	uiPassword    = "river-ui-test-password"
	webhookSecret = "whsec_river_ui_test_secret"
)

// TestRiverUIInBrowser opens River's UI in headless Chromium as an operator does: the UI
// started by the Procfile's ui line with a login, beside the API, the enqueuer and the worker.
// A request without the login is refused. A ride is booked through the API, and the UI lists
// its receipt job, completed. A second receipt job, whose only attempt the mail server refused,
// is discarded by River; the test opens it in the UI and clicks Retry, and the job runs again
// and sends its receipt. A second UI, under a path prefix as a reverse proxy routes it, lists the
// job too. No page shown holds the API token secret, the webhook secret, the
// rider's token, the UI's password or the card the rider was made with.
func TestRiverUIInBrowser(t *testing.T) {
	t.Parallel()
	browser := browsertest.Start(t)
	ctx := context.Background()
	b := startBase(t, "river-ui@example.com")
	env := append(b.env, "STRIPE_WEBHOOK_SECRET="+webhookSecret)

	apiPort := proctest.FreePort(t)
	api := proctest.Start(t, proctest.Build(t, "api"), append(env, fmt.Sprintf("PORT=%d", apiPort)))
	proctest.Start(t, proctest.Build(t, "enqueuer"), env)
	worker := proctest.Start(t, proctest.Build(t, "worker"), env)
	uiPort := proctest.FreePort(t)
	ui := startProcfileLine(t, "ui", append(env, fmt.Sprintf("PORT=%d", uiPort), "UI_USERNAME="+uiUsername, "UI_PASSWORD="+uiPassword))
	uiURL := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	proctest.WaitHTTP(t, api, apiURL+"/readyz", 30*time.Second)
	proctest.WaitHTTP(t, ui, fmt.Sprintf("http://%s:%s@127.0.0.1:%d/api/health-checks/complete", uiUsername, uiPassword, uiPort), 60*time.Second)
	proctest.WaitOutput(t, worker, ": started", 30*time.Second)

	conn, err := pgx.Connect(ctx, b.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// Without the login, the UI's pages and its API are refused.
	for _, path := range []string{"/", "/jobs?state=completed", "/api/jobs?state=completed"} {
		resp, err := http.Get(uiURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("GET %s without the login: want 401 with a Basic challenge, got %d", path, resp.StatusCode)
		}
	}

	// A ride booked through the API; the worker mails its receipt and completes its job.
	booked, err := (&client.Client{BaseURL: apiURL, Token: b.riderToken}).CreateRide(ctx,
		client.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863})
	if err != nil {
		t.Fatal(err)
	}
	bookedJob := waitJobState(t, conn, booked.Ride.ID, rivertype.JobStateCompleted)

	// A second charged ride of the rider, whose receipt job has one attempt, which the mail
	// server refuses: River discards the job.
	var userID int64
	if err := conn.QueryRow(ctx, `SELECT id FROM users WHERE email = 'river-ui@example.com'`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	var failedRide int64
	if err := conn.QueryRow(ctx, `
		INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
		VALUES (0, 0, 1, 1, 'ch_river_ui', $1) RETURNING id`, userID).Scan(&failedRide); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, b.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	riverClient, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b.mail.FailNext(1, "554 5.7.1 Relay access denied")
	if _, err := riverClient.Insert(ctx, jobargs.SendRideReceipt{
		RideID: failedRide, UserID: userID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, &river.InsertOpts{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	failedJob := waitJobState(t, conn, strconv.FormatInt(failedRide, 10), rivertype.JobStateDiscarded)

	// The browser sends the login with every request, as it would once a person typed it in.
	login := base64.StdEncoding.EncodeToString([]byte(uiUsername + ":" + uiPassword))
	if _, err := chromedp.Call(browser.Ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(browser.Ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Basic " + login},
	}); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"API_TOKEN_SECRET": ridetest.TokenSecret, "STRIPE_WEBHOOK_SECRET": webhookSecret,
		"the rider's token": b.riderToken, "UI_PASSWORD": uiPassword, "the rider's card": "tok_visa",
	}

	// The completed jobs list the booked ride's receipt job, with its ride.
	page := browse(t, browser, uiURL+"/jobs?state=completed", booked.Ride.ID, secrets)
	if !strings.Contains(page, jobargs.SendRideReceiptKind) {
		t.Fatalf("want the completed jobs to show the receipt job %d of ride %s:\n%s", bookedJob, booked.Ride.ID, page)
	}

	// The discarded job, opened and retried: it runs again and the receipt goes out.
	browse(t, browser, fmt.Sprintf("%s/jobs/%d", uiURL, failedJob), "Relay access denied", secrets)
	if err := do(browser, chromedp.Click(`//button[normalize-space()="Retry"]`)); err != nil {
		t.Fatalf("error clicking Retry: %v", err)
	}
	if got := waitJobState(t, conn, strconv.FormatInt(failedRide, 10), rivertype.JobStateCompleted); got != failedJob {
		t.Fatalf("want the retried job %d itself completed, got job %d", failedJob, got)
	}
	var sent bool
	if err := conn.QueryRow(ctx, `SELECT receipt_sent_at IS NOT NULL FROM rides WHERE id = $1`, failedRide).Scan(&sent); err != nil || !sent {
		t.Fatalf("want the retried receipt recorded as sent, got %t (%v)", sent, err)
	}
	browse(t, browser, fmt.Sprintf("%s/jobs/%d", uiURL, failedJob), "Completed", secrets)

	// Under a path prefix, as a reverse proxy routes it, the pages load their scripts and ask
	// the API under the prefix.
	prefixPort := proctest.FreePort(t)
	prefixed := startProcfileLine(t, "ui", append(env, fmt.Sprintf("PORT=%d", prefixPort), "UI_PATH_PREFIX=/ops/river",
		"UI_USERNAME="+uiUsername, "UI_PASSWORD="+uiPassword))
	prefixURL := fmt.Sprintf("http://127.0.0.1:%d/ops/river", prefixPort)
	proctest.WaitHTTP(t, prefixed, fmt.Sprintf("http://%s:%s@127.0.0.1:%d/ops/river/api/health-checks/complete", uiUsername, uiPassword, prefixPort), 60*time.Second)
	browse(t, browser, prefixURL+"/jobs?state=completed", booked.Ride.ID, secrets)

	ui.Terminate(t, 15*time.Second)
	prefixed.Terminate(t, 15*time.Second)
}

// browseTimeout bounds one page's load and render, seconds on a loaded machine.
const browseTimeout = 60 * time.Second

// do runs steps in the browser, bounded by browseTimeout.
func do(browser *browsertest.Browser, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(browser.Ctx, browseTimeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// browse opens url, waits until the page's text shows want, and returns the page's HTML, which
// must hold none of secrets' values.
func browse(t *testing.T, browser *browsertest.Browser, url, want string, secrets map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser.Ctx, browseTimeout)
	defer cancel()
	shows := fmt.Sprintf("document.body && document.body.innerText.includes(%q)", want)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := chromedp.Poll[chromedp.Void](shows, chromedp.WithPollingTimeout(browseTimeout))(ctx, target)
		return err
	})); err != nil {
		textCtx, cancelText := context.WithTimeout(browser.Ctx, 10*time.Second)
		defer cancelText()
		text, _ := chromedp.Run(textCtx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		t.Fatalf("%s: want the page to show %q: %v\n%s", url, want, err, text)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range secrets {
		if strings.Contains(page, secret) {
			t.Fatalf("%s shows %s", url, name)
		}
	}
	return page
}

// waitJobState waits until the receipt job of the ride is in state, and returns its id.
func waitJobState(t *testing.T, conn *pgx.Conn, rideID string, state rivertype.JobState) int64 {
	t.Helper()
	var id int64
	var got rivertype.JobState
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		err := conn.QueryRow(context.Background(), `SELECT id, state FROM river_job WHERE kind = $1 AND args->>'ride_id' = $2`,
			jobargs.SendRideReceiptKind, rideID).Scan(&id, &got)
		if err == nil && got == state {
			return id
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
	}
	t.Fatalf("want the receipt job of ride %s %s, got job %d %q", rideID, state, id, got)
	return 0
}

// startProcfileLine runs the Procfile's line for process as a Procfile manager does, with sh in
// a directory whose bin/ holds this test's builds of the commands, and env for .env.
func startProcfileLine(t *testing.T, process string, env []string) *proctest.Process {
	t.Helper()
	data, err := os.ReadFile("../../../Procfile")
	if err != nil {
		t.Fatal(err)
	}
	var command string
	for line := range strings.Lines(string(data)) {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), process+":"); ok {
			command = strings.TrimSpace(c)
		}
	}
	if command == "" {
		t.Fatalf("the Procfile has no %s line", process)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, field := range strings.Fields(command) {
		if name, ok := strings.CutPrefix(field, "bin/"); ok {
			if err := os.Symlink(proctest.Build(t, name), filepath.Join(dir, "bin", name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return proctest.StartIn(t, dir, "sh", env, "-c", command)
}
