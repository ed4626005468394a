package e2etest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

// base is what every end-to-end test starts from: a database of its own, an SMTP server, the
// Stripe stand-in as a process, the environment every process of the service reads, and one
// rider whose card works.
type base struct {
	databaseURL string
	mail        *smtptest.Server
	stripeURL   string
	env         []string // DATABASE_URL, STRIPE_API_KEY, STRIPE_API_URL, SMTP_URL, RATE_LIMITS
	riderToken  string
}

// startBase starts a base whose rider has riderEmail.
func startBase(t *testing.T, riderEmail string) *base {
	t.Helper()
	b := &base{databaseURL: dbtest.NewDB(t), mail: smtptest.NewServer(t, smtptest.Options{})}

	stripe := proctest.Start(t, proctest.Build(t, "fakestripe"), nil, "-addr", "127.0.0.1:0")
	b.stripeURL = strings.TrimSpace(proctest.WaitOutput(t, stripe, "http://", 10*time.Second))
	b.env = []string{
		"DATABASE_URL=" + b.databaseURL,
		"STRIPE_API_KEY=sk_test_e2e",
		"API_TOKEN_SECRET=" + ridetest.TokenSecret,
		"STRIPE_API_URL=" + b.stripeURL,
		"SMTP_URL=" + b.mail.URL(),
		// One rider books many rides at once (the e2e test: 20 rides and their 20 replays),
		// which the API's limits would stretch over a minute and more of waiting out 429s;
		// these tests are about the processes working together, and api's own tests cover
		// the limits.
		"RATE_LIMITS=off",
	}

	b.riderToken = createRider(t, proctest.Build(t, "admin"), b.env, riderEmail)
	return b
}

// createRider runs admin (the binary at adminBin) create-user for a rider with a card that works,
// as an operator does, and returns the rider's API token.
func createRider(t *testing.T, adminBin string, env []string, email string) string {
	t.Helper()
	out, errOut, code := proctest.Run(t, adminBin, env, "create-user", "-email", email, "-card", "tok_visa")
	if code != 0 {
		t.Fatalf("create-user exited %d: %s", code, errOut)
	}
	var rider struct{ Token string }
	if err := json.Unmarshal([]byte(out), &rider); err != nil {
		t.Fatalf("create-user printed %q: %s", out, err)
	}
	return rider.Token
}
