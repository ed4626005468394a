//go:build procfile

package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/dbtest"
	"github.com/rocketrides/rocketrides/internal/proctest"
	"github.com/rocketrides/rocketrides/internal/smtptest"
)

// TestProcfile starts the repository's Procfile with a real Procfile manager (foreman, or
// honcho), books a ride through it and waits for its receipt, then stops the manager and checks
// that no process is left. It needs the manager installed, so it runs under the procfile build
// tag: `go test -tags procfile -run TestProcfile ./internal/e2etest` (.ci/run does).
func TestProcfile(t *testing.T) {
	manager, err := exec.LookPath("foreman")
	if err != nil {
		if manager, err = exec.LookPath("honcho"); err != nil {
			t.Fatal("no Procfile manager on PATH: install one (Debian: apt-get install ruby-foreman)")
		}
	}
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	databaseURL := dbtest.NewDB(t)
	mail := smtptest.NewServer(t, smtptest.Options{})
	stripe := proctest.Start(t, proctest.Build(t, "fakestripe"), nil, "-addr", "127.0.0.1:0")
	stripeURL := strings.TrimSpace(proctest.WaitOutput(t, stripe, "http://", 10*time.Second))
	port := proctest.FreePort(t)

	// The environment is the README's: .env.example, pointed at this test's database, Stripe,
	// mail server and port.
	env := envFromExample(t, filepath.Join(root, ".env.example"), map[string]string{
		"DATABASE_URL":   databaseURL,
		"STRIPE_API_URL": stripeURL,
		"SMTP_URL":       mail.URL(),
		"PORT":           fmt.Sprint(port),
		"API_URL":        fmt.Sprintf("http://127.0.0.1:%d", port),
	})
	envFile := filepath.Join(t.TempDir(), "procfile.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := proctest.Run(t, proctest.Build(t, "admin"), env, "create-user", "-email", "procfile@example.com", "-card", "tok_visa")
	if code != 0 {
		t.Fatalf("create-user exited %d: %s", code, errOut)
	}
	var rider struct{ Token string }
	if err := json.Unmarshal([]byte(out), &rider); err != nil {
		t.Fatal(err)
	}

	fm := proctest.StartIn(t, root, manager, nil, "start", "-f", filepath.Join(root, "Procfile"), "-e", envFile, "-d", root)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	proctest.WaitHTTP(t, fm, apiURL+"/readyz", 3*time.Minute) // the first start compiles

	c := &client.Client{BaseURL: apiURL, Token: rider.Token}
	result, err := c.CreateRide(ctx, client.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4})
	if err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var sent bool
		if err := conn.QueryRow(ctx, `SELECT receipt_sent_at IS NOT NULL FROM rides WHERE id = $1`, result.Ride.ID).Scan(&sent); err != nil {
			t.Fatal(err)
		}
		if sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipt recorded for ride %s:\n%s", result.Ride.ID, fm.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	found := false
	for _, m := range mail.Messages() {
		found = found || (len(m.To) == 1 && m.To[0] == "procfile@example.com")
	}
	if !found {
		t.Fatal("want the receipt email delivered to the rider")
	}
	// The simulator books rides of its own through the same API.
	proctest.WaitOutput(t, fm, "Simulator: ride booked", time.Minute)

	if err := fm.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fm.Wait(t, 30*time.Second)
	if strings.Contains(fm.Output(), "SIGKILL") {
		t.Fatalf("want every process to stop within the manager's grace period:\n%s", fm.Output())
	}
	for name, query := range map[string]string{
		"locked keys":  `SELECT count(*) FROM idempotency_keys WHERE locked_at IS NOT NULL`,
		"running jobs": `SELECT count(*) FROM river_job WHERE state = 'running'`,
	} {
		var n int
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil || n != 0 {
			t.Fatalf("want no %s after a clean stop, got %d (%v)", name, n, err)
		}
	}
	if leftover, _ := exec.Command("pgrep", "-f", filepath.Join(root, ".data", "bin")).Output(); len(strings.TrimSpace(string(leftover))) > 0 {
		t.Fatalf("processes left behind after the manager stopped: %s", leftover)
	}
}

// envFromExample reads a KEY=VALUE file such as .env.example and overrides some of its values.
func envFromExample(t *testing.T, path string, overrides map[string]string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		if v, ok := overrides[key]; ok {
			value = v
		}
		seen[key] = true
		env = append(env, key+"="+value)
	}
	for key, value := range overrides {
		if !seen[key] {
			env = append(env, key+"="+value)
		}
	}
	return env
}
