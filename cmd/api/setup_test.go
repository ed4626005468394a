package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// testBundle is the API with everything it needs, each a real process.
type testBundle struct {
	databaseURL string
	stripeURL   string
	base        string // the API's base URL
	token       string // a rider's API token
	api         *proctest.Process
}

// setup walks the steps of "By hand" in docs/operations.md with the real binaries: migrate
// (twice, to show it is safe), start the Stripe stand-in, create a rider, start the API.
func setup(t *testing.T, extraEnv ...string) *testBundle {
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
	env := []string{databaseURL, "STRIPE_API_KEY=sk_test_readme", "STRIPE_API_URL=" + stripeURL, "API_TOKEN_SECRET=" + ridetest.TokenSecret}

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
	s := &testBundle{
		databaseURL: strings.TrimPrefix(databaseURL, "DATABASE_URL="),
		stripeURL:   stripeURL,
		base:        fmt.Sprintf("http://127.0.0.1:%d", port),
		token:       user.Token,
	}
	s.api = proctest.Start(t, apiBin, append(append(env, fmt.Sprintf("PORT=%d", port)), extraEnv...))
	proctest.WaitHTTP(t, s.api, s.base+"/readyz", 15*time.Second)
	return s
}

// postRide sends the curl request of those steps and returns the status, replay header and body.
func (s *testBundle) postRide(t *testing.T) (int, string, string) {
	t.Helper()
	return s.postRideWithHeader(t, "Idempotent-Replayed")
}

// postRideWithHeader sends the curl request of those steps and returns the status, the answer's
// header named header, and the body.
func (s *testBundle) postRideWithHeader(t *testing.T, header string) (int, string, string) {
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
func (s *testBundle) stop(t *testing.T) {
	t.Helper()
	s.api.Terminate(t, 10*time.Second)
}
