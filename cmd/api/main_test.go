package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/dbtest"
	"github.com/rocketrides/rocketrides/internal/proctest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestReadmeQuickStart walks the README's "run the API against a database" steps with the real
// binaries: migrate, start the Stripe stand-in, create a rider, start the API, book a ride with
// the README's curl request, replay it, and stop the API with SIGTERM.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	databaseURL := "DATABASE_URL=" + dbtest.NewEmptyDB(t)
	migrateBin, stripeBin, adminBin, apiBin := proctest.Build(t, "migrate"), proctest.Build(t, "fakestripe"),
		proctest.Build(t, "admin"), proctest.Build(t, "api")

	for range 2 { // safe to run twice
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
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	api := proctest.Start(t, apiBin, append(env, fmt.Sprintf("PORT=%d", port)))
	proctest.WaitHTTP(t, api, base+"/readyz", 15*time.Second)

	post := func() *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/rides",
			strings.NewReader("origin_lat=0.0&origin_lon=0.0&target_lat=0.0&target_lon=0.0"))
		req.Header.Set("Authorization", "Bearer "+user.Token)
		req.Header.Set("Idempotency-Key", "readme-key-0123456789abcdef")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := post()
	firstBody, _ := io.ReadAll(first.Body)
	first.Body.Close()
	if first.StatusCode != http.StatusCreated || !strings.Contains(string(firstBody), `"stripe_charge_id":"ch_`) {
		t.Fatalf("want 201 with a charged ride, got %d %s", first.StatusCode, firstBody)
	}
	second := post()
	secondBody, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusCreated || second.Header.Get("Idempotent-Replayed") != "true" || string(secondBody) != string(firstBody) {
		t.Fatalf("want the 201 replayed, got %d %q %s", second.StatusCode, second.Header.Get("Idempotent-Replayed"), secondBody)
	}

	if err := api.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := api.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 after SIGTERM, got %d:\n%s", code, api.Output())
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
