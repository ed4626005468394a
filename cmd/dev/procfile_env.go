package main

import (
	"fmt"
	"io"
	"text/template"
)

// The ports of the Procfile path, every one from PORT (api.PortDefault when unset), so that one
// setting moves them all. A Procfile manager gives its i-th process type PORT+100*i (the API
// first, the reaper, fifth, at +400, River's UI, sixth, at +500), and the Procfile serves the
// API's metrics at PORT+50; the database and the Stripe stand-in come after them.
const (
	// procfileDatabaseOffset is where -db-only's database listens; with -ha, its first node,
	// the second at the next port and the pg_auto_failover monitor at the port before.
	procfileDatabaseOffset = 601

	// procfileStripeOffset is where the Stripe stand-in listens.
	procfileStripeOffset = 700
)

// devWebhookSecret is the webhook signing secret of the development stacks, shared by the
// stand-in that signs and the API that verifies.
const devWebhookSecret = "whsec_rocketrides_dev"

// devTokenSecret is the API token secret of the development stacks (API_TOKEN_SECRET), shared by
// admin, which makes riders' tokens, and the API, which checks them. A production stack makes its
// own, which is why the processes have no default.
const devTokenSecret = "rocketrides-dev-token-secret-not-for-production"

// procfileDatabaseURL is the database that the Procfile's processes use, and that -db-only
// serves, with every port from port.
func procfileDatabaseURL(port int, ha bool) string {
	first := port + procfileDatabaseOffset
	if ha {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?target_session_attrs=read-write&sslmode=disable", first, first+1, databaseName)
	}
	return fmt.Sprintf("postgres://postgres@localhost:%d/%s?sslmode=disable", first, databaseName)
}

// writeProcfileEnv writes the .env of the Procfile path (dev -env): every port from port, the
// database a highly available formation's with ha. .env.example is its output on the defaults.
func writeProcfileEnv(w io.Writer, port int, ha bool) error {
	return procfileEnvTemplate.Execute(w, map[string]any{
		"Port":         port,
		"DatabaseURL":  procfileDatabaseURL(port, ha),
		"DatabasePort": port + procfileDatabaseOffset,
		"StripePort":   port + procfileStripeOffset,
		"MetricsPorts": []int{port + 50, port + 100, port + 200, port + 300, port + 400},
		"UIPort":       port + 500,
	})
}

var procfileEnvTemplate = template.Must(template.New(".env").Parse(`# The settings of the Procfile path, which foreman, node-foreman, honcho and overmind read from
# .env by default; every process reads its own from these variables (see the table in docs/operations.md).
# Every port here follows PORT: to move them all, ` + "`PORT=6004 go run ./cmd/dev -env > .env`" + `
# writes this file again with each one moved as far (-ha: the formation's DATABASE_URL).

# A Procfile manager gives each process type its own PORT, counting up from this one by 100 in
# Procfile order: the API (first) gets this one. The opt-in simulator finds it by API_URL.
PORT={{.Port}}
API_URL=http://localhost:{{.Port}}

# The database, at PORT+601: ` + "`foreman run -- go run ./cmd/dev -db-only`" + ` runs one here, migrated,
# kept in .data/postgres. For a database of your own, name it here and run
# ` + "`foreman run bin/migrate up`" + `.
DATABASE_URL={{.DatabaseURL}}

# The Stripe stand-in, at PORT+700: ` + "`foreman run bin/fakestripe`" + ` listens where STRIPE_API_URL
# says, and accepts any sk_test_ key; with -journal .data/fakestripe.jsonl it keeps its customers
# beside the database's riders. Unset STRIPE_API_URL and use a real test key to talk to Stripe.
STRIPE_API_KEY=sk_test_rocketrides
STRIPE_API_URL=http://127.0.0.1:{{.StripePort}}

# The stand-in posts what happens to its charges (refunds, disputes) to the API's webhook,
# signed with this secret, which the API verifies them with. With real Stripe, the secret is the
# endpoint's whsec_ from the dashboard, and STRIPE_WEBHOOK_URL is not ours to set.
STRIPE_WEBHOOK_SECRET=` + devWebhookSecret + `
STRIPE_WEBHOOK_URL=http://localhost:{{.Port}}/webhooks/stripe

# The secret riders' API tokens carry a MAC under: the API refuses a token without a valid one
# before asking the database, and admin create-user makes tokens with it. This one is for
# development; in production, make one with ` + "`openssl rand -base64 32`" + ` and keep it with the
# other secrets. Changing it makes every token invalid (admin reissue-token gives a new one).
API_TOKEN_SECRET=` + devTokenSecret + `

# The Procfile sets METRICS_ADDR for each process, so every one serves Prometheus's GET /metrics
# at once: the API on PORT+50 ({{index .MetricsPorts 0}}), the worker, enqueuer, completer and reaper on their own
# PORT ({{index .MetricsPorts 1}}, {{index .MetricsPorts 2}}, {{index .MetricsPorts 3}}, {{index .MetricsPorts 4}}). Outside a Procfile, METRICS_ADDR=host:port turns it on.

# River's UI, the Procfile's sixth line (admin ui), is at http://127.0.0.1:{{.UIPort}}/, its PORT: on
# loopback, with no login. To open it to other machines, set UI_ADDR=:{{.UIPort}} with UI_USERNAME
# and UI_PASSWORD, and UI_PATH_PREFIX behind a reverse proxy (docs/operations.md, "River's UI").

# overmind reads .env too, and sends SIGKILL 5 s after asking a process to stop unless told
# otherwise; the processes take up to 10 s. (foreman's own setting is in .foreman.)
OVERMIND_TIMEOUT=15

# Set, the API accepts the demo parameter raise_error, and the opt-in simulator sends it in one
# ride in ten, to show the completer finishing broken requests. For a demo, never in production.
# SIMULATE_ERRORS=true

# Unset: the worker logs each receipt email. Set: smtp://[user:pass@]host:port or smtps://...
# SMTP_URL=smtp://localhost:1025
`))
