package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestReadmeQuickStart walks the README's "run the API against a database" steps with the real
// binaries: migrate, start the Stripe stand-in, create a rider, start the API, book a ride with
// the README's curl request, replay it, and stop the API with SIGTERM.
// stack is the API with everything it needs, each a real process.
type stack struct {
	databaseURL string
	stripeURL   string
	base        string // the API's base URL
	token       string // a rider's API token
	api         *proctest.Process
}

// startStack walks the README's "Running the API" steps with the real binaries: migrate (twice,
// to show it is safe), start the Stripe stand-in, create a rider, start the API.
func startStack(t *testing.T, extraEnv ...string) *stack {
	t.Helper()
	databaseURL := "DATABASE_URL=" + dbtest.NewEmptyDB(t)
	migrateBin, stripeBin, adminBin, apiBin := proctest.Build(t, "migrate"), proctest.Build(t, "fakestripe"),
		proctest.Build(t, "admin"), proctest.Build(t, "api")

	for range 2 {
		if out, errOut, code := proctest.Run(t, migrateBin, []string{databaseURL}, "up"); code != 0 {
			t.Fatalf("migrate up exited %d: %s%s", code, out, errOut)
		}
	}

	stripe := proctest.Start(t, stripeBin, nil, "-addr", "127.0.0.1:0")
	stripeURL := strings.TrimSpace(proctest.WaitOutput(t, stripe, "http://", 10*time.Second))
	env := []string{databaseURL, "STRIPE_API_KEY=sk_test_readme", "STRIPE_API_URL=" + stripeURL}

	out, errOut, code := proctest.Run(t, adminBin, env, "create-user", "-email", "Rider@Example.com", "-card", "tok_visa")
	if code != 0 {
		t.Fatalf("admin create-user exited %d: %s", code, errOut)
	}
	var user struct {
		ID    int64  `json:"id"`
		Email string `json:"email"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &user); err != nil || user.ID == 0 || user.Email != "rider@example.com" || !strings.HasPrefix(user.Token, "rr_") {
		t.Fatalf("want one JSON line with id, email and token, got %q (%v)", out, err)
	}
	if _, errOut, code := proctest.Run(t, adminBin, env, "create-user", "-email", "rider@example.com", "-stripe-customer-id", "cus_other"); code == 0 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("want a duplicate email refused with a clear error, got exit %d: %s", code, errOut)
	}

	port := proctest.FreePort(t)
	s := &stack{
		databaseURL: strings.TrimPrefix(databaseURL, "DATABASE_URL="),
		stripeURL:   stripeURL,
		base:        fmt.Sprintf("http://127.0.0.1:%d", port),
		token:       user.Token,
	}
	s.api = proctest.Start(t, apiBin, append(append(env, fmt.Sprintf("PORT=%d", port)), extraEnv...))
	proctest.WaitHTTP(t, s.api, s.base+"/readyz", 15*time.Second)
	return s
}

// postRide sends the README's curl request and returns the status, replay header and body.
func (s *stack) postRide(t *testing.T) (int, string, string) {
	t.Helper()
	return s.postRideWithHeader(t, "Idempotent-Replayed")
}

// postRideWithHeader sends the README's curl request and returns the status, the answer's header
// named header, and the body.
func (s *stack) postRideWithHeader(t *testing.T, header string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.base+"/rides",
		strings.NewReader("origin_lat=0.0&origin_lon=0.0&target_lat=0.0&target_lon=0.0"))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Idempotency-Key", "readme-key-0123456789abcdef")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(header), string(body)
}

// stop sends SIGTERM to the API and requires a clean exit within the 10 s the processes promise.
func (s *stack) stop(t *testing.T) {
	t.Helper()
	if err := s.api.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.api.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 after SIGTERM, got %d:\n%s", code, s.api.Output())
	}
}

// TestReadmeQuickStart books a ride with the README's curl request, replays it, and stops the API.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	s := startStack(t)

	status, replayed, first := s.postRide(t)
	if status != http.StatusCreated || replayed != "" || !strings.Contains(first, `"stripe_charge_id":"ch_`) {
		t.Fatalf("want 201 with a charged ride, got %d %s", status, first)
	}
	status, replayed, second := s.postRide(t)
	if status != http.StatusCreated || replayed != "true" || second != first {
		t.Fatalf("want the 201 replayed, got %d %q %s", status, replayed, second)
	}

	// The README's `curl http://localhost:5004/openapi.yaml`.
	resp, err := http.Get(s.base + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	contract, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" || !strings.Contains(string(contract), "\nopenapi: 3.1") {
		t.Fatalf("want the contract served as YAML, got %d %q: %.60s", resp.StatusCode, resp.Header.Get("Content-Type"), contract)
	}
	s.stop(t)
}

// TestShutdownAbortsARequestStuckOnStripe stops the API while a ride request waits on a Stripe
// that never answers: the API still exits 0 within 10 s, the request is answered 503, its key is
// left unlocked at ride_created, ready for a retry to resume.
func TestShutdownAbortsARequestStuckOnStripe(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	control := func(method, path, body string) string {
		req, _ := http.NewRequest(method, s.stripeURL+"/_fakestripe/"+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	control(http.MethodPost, "faults", `{"kind": "timeout", "count": 1}`)

	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		status, _, body := s.postRide(t)
		answered <- answer{status, body}
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(control(http.MethodGet, "faults", ""), `"pending_faults":[]`); {
		if time.Now().After(deadline) {
			t.Fatal("the ride request never reached Stripe")
		}
		time.Sleep(20 * time.Millisecond)
	}

	s.stop(t)
	got := <-answered
	if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, `"service_unavailable"`) {
		t.Fatalf("want 503 service_unavailable, got %d %s", got.status, got.body)
	}

	conn, err := pgx.Connect(context.Background(), s.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var point string
	var locked bool
	if err := conn.QueryRow(context.Background(), `SELECT recovery_point, locked_at IS NOT NULL FROM idempotency_keys`).Scan(&point, &locked); err != nil {
		t.Fatal(err)
	}
	if point != "ride_created" || locked {
		t.Fatalf("want the key unlocked at ride_created, got %s locked=%t", point, locked)
	}
}

func TestRefusesToStartWithoutADatabase(t *testing.T) {
	t.Parallel()
	api := proctest.Build(t, "api")

	t.Run("Unmigrated", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"DATABASE_URL=" + dbtest.NewEmptyDB(t), "STRIPE_API_KEY=sk_test_x"})
		if code == 0 || !strings.Contains(errOut, "not migrated") {
			t.Fatalf("want a non-zero exit naming the missing migrations, got %d: %s", code, errOut)
		}
	})
	t.Run("NoDatabaseURL", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"STRIPE_API_KEY=sk_test_x"})
		if code == 0 || !strings.Contains(errOut, "DATABASE_URL is not set") {
			t.Fatalf("want a non-zero exit naming DATABASE_URL, got %d: %s", code, errOut)
		}
	})
	t.Run("DatabaseUnreachable", func(t *testing.T) {
		t.Parallel()
		url := fmt.Sprintf("DATABASE_URL=postgres://postgres@127.0.0.1:%d/rocketrides?sslmode=disable&connect_timeout=1", proctest.FreePort(t))
		start := time.Now()
		_, errOut, code := proctest.Run(t, api, []string{url, "STRIPE_API_KEY=sk_test_x"})
		if code == 0 || !strings.Contains(errOut, "database not reachable after 10s") {
			t.Fatalf("want a non-zero exit saying the database is not reachable, got %d: %s", code, errOut)
		}
		if elapsed := time.Since(start); elapsed < 10*time.Second {
			t.Fatalf("want it to keep trying for 10 s first, gave up after %s", elapsed)
		}
	})
	t.Run("NoStripeKey", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"DATABASE_URL=" + dbtest.NewDB(t)})
		if code == 0 || !strings.Contains(errOut, "STRIPE_API_KEY is not set") {
			t.Fatalf("want a non-zero exit naming STRIPE_API_KEY, got %d: %s", code, errOut)
		}
	})
}

// TestStopWhileWaitingForTheDatabase stops the API while it still waits for its database at
// start, as a Procfile manager stopping everything at once does: a clean exit, not a failure.
func TestStopWhileWaitingForTheDatabase(t *testing.T) {
	t.Parallel()
	url := fmt.Sprintf("DATABASE_URL=postgres://postgres@127.0.0.1:%d/rocketrides?sslmode=disable&connect_timeout=1", proctest.FreePort(t))
	api := proctest.Start(t, proctest.Build(t, "api"), []string{url, "STRIPE_API_KEY=sk_test_x"})
	proctest.WaitOutput(t, api, "database not reachable yet", 10*time.Second)
	if err := api.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := api.Wait(t, 5*time.Second); code != 0 {
		t.Fatalf("want exit 0, got %d:\n%s", code, api.Output())
	}
}
