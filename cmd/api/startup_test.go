package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

func TestRefusesToStartWithoutADatabase(t *testing.T) {
	t.Parallel()
	api := proctest.Build(t, "api")

	t.Run("Unmigrated", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"DATABASE_URL=" + dbtest.NewEmptyDB(t), "STRIPE_API_KEY=sk_test_x", "API_TOKEN_SECRET=" + ridetest.TokenSecret})
		if code == 0 || !strings.Contains(errOut, "not migrated") {
			t.Fatalf("want a non-zero exit naming the missing migrations, got %d: %s", code, errOut)
		}
	})
	t.Run("NoDatabaseURL", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"STRIPE_API_KEY=sk_test_x", "API_TOKEN_SECRET=" + ridetest.TokenSecret})
		if code == 0 || !strings.Contains(errOut, "DATABASE_URL is not set") {
			t.Fatalf("want a non-zero exit naming DATABASE_URL, got %d: %s", code, errOut)
		}
	})
	t.Run("NoTokenSecret", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"DATABASE_URL=" + dbtest.NewDB(t), "STRIPE_API_KEY=sk_test_x"})
		if code == 0 || !strings.Contains(errOut, "API_TOKEN_SECRET is required") {
			t.Fatalf("want a non-zero exit naming API_TOKEN_SECRET, got %d: %s", code, errOut)
		}
	})
	t.Run("TokenSecretTooShort", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"DATABASE_URL=" + dbtest.NewDB(t), "STRIPE_API_KEY=sk_test_x", "API_TOKEN_SECRET=short"})
		if code == 0 || !strings.Contains(errOut, "API_TOKEN_SECRET: the token secret must be at least 32 bytes") {
			t.Fatalf("want a non-zero exit saying the secret is too short, got %d: %s", code, errOut)
		}
	})
	t.Run("DatabaseUnreachable", func(t *testing.T) {
		t.Parallel()
		url := fmt.Sprintf("DATABASE_URL=postgres://postgres@127.0.0.1:%d/rocketrides?sslmode=disable&connect_timeout=1", proctest.FreePort(t))
		start := time.Now()
		_, errOut, code := proctest.Run(t, api, []string{url, "STRIPE_API_KEY=sk_test_x", "API_TOKEN_SECRET=" + ridetest.TokenSecret})
		if code == 0 || !strings.Contains(errOut, "database not reachable after 10s") {
			t.Fatalf("want a non-zero exit saying the database is not reachable, got %d: %s", code, errOut)
		}
		if elapsed := time.Since(start); elapsed < 10*time.Second {
			t.Fatalf("want it to keep trying for 10 s first, gave up after %s", elapsed)
		}
	})
	t.Run("NoStripeKey", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := proctest.Run(t, api, []string{"DATABASE_URL=" + dbtest.NewDB(t), "API_TOKEN_SECRET=" + ridetest.TokenSecret})
		if code == 0 || !strings.Contains(errOut, "STRIPE_API_KEY is not set") {
			t.Fatalf("want a non-zero exit naming STRIPE_API_KEY, got %d: %s", code, errOut)
		}
	})
}

// TestPortInUse: an API started where another process listens exits with one line that names
// the setting to change, PORT or METRICS_ADDR, rather than a line buried among others'.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	s := setup(t)
	port := strings.TrimPrefix(s.base, "http://127.0.0.1:")
	env := []string{"DATABASE_URL=" + s.databaseURL, "STRIPE_API_KEY=sk_test_x", "STRIPE_API_URL=" + s.stripeURL, "API_TOKEN_SECRET=" + ridetest.TokenSecret}
	for setting, extra := range map[string][]string{
		"PORT":         {"PORT=" + port},
		"METRICS_ADDR": {"PORT=" + strconv.Itoa(proctest.FreePort(t)), "METRICS_ADDR=127.0.0.1:" + port},
	} {
		_, errOut, code := proctest.Run(t, proctest.Build(t, "api"), append(env, extra...))
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "is in use by another process: set "+setting+" to a free port") {
			t.Errorf("want exit 1 with one line naming %s, got %d: %s", setting, code, errOut)
		}
	}
}

// Without STRIPE_WEBHOOK_SECRET the API serves no webhook, says so once at start, and answers
// the route 404; with it, the route verifies signatures.
func TestWebhookSecret(t *testing.T) {
	t.Parallel()
	const warning = "STRIPE_WEBHOOK_SECRET is not set, so POST /webhooks/stripe is off"

	off := setup(t)
	if n := strings.Count(off.api.Output(), warning); n != 1 {
		t.Errorf("want the API to say once that webhooks are off, got %d times in:\n%s", n, off.api.Output())
	}
	if status := postEmpty(t, off.base+"/webhooks/stripe"); status != http.StatusNotFound {
		t.Errorf("want the route off, got %d", status)
	}

	on := setup(t, "STRIPE_WEBHOOK_SECRET=whsec_startup_test")
	if strings.Contains(on.api.Output(), warning) {
		t.Errorf("want no warning with a secret, got:\n%s", on.api.Output())
	}
	if status := postEmpty(t, on.base+"/webhooks/stripe"); status != http.StatusBadRequest {
		t.Errorf("want an unsigned event refused, got %d", status)
	}
}

// postEmpty posts an empty JSON object to url and returns the status.
func postEmpty(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
