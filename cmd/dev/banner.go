package main

import (
	"strings"
	"text/template"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// metricsEndpoint is where one process serves its Prometheus metrics.
type metricsEndpoint struct {
	Name string
	URL  string
}

// bannerData is what the banner tells.
type bannerData struct {
	APIURL       string
	DatabaseURL  string
	MonitorURL   string // with -ha
	StripeAPIKey string
	TokenSecret  string
	StripeURL    string
	State        stateDir
	Rider        *supervisor.Rider
	Declined     *supervisor.Rider
	Metrics      []metricsEndpoint
	UIURL        string // River's UI
	JaegerURL    string // with -traces
}

// bannerTemplate is printed once everything it names answers. Its export lines are what admin,
// the simulator and cmd/rides read, so that a second terminal can use the stack; its commands
// use them. DATABASE_URL is quoted: a socket URL holds '&'. Each demo says how it ends and how
// to see it; the rate limit keeps a demo rider to 10 rides a minute.
var bannerTemplate = template.Must(template.New("banner").Parse(`
Rocket Rides is running.

  API          {{.APIURL}}
  Stripe       {{.StripeURL}} (stand-in)
  River's UI   {{.UIURL}} (background jobs: receipts sent, failed, retried)
{{- if .JaegerURL}}
  Traces       {{.JaegerURL}} (Jaeger's query API, which every process sends its spans to;
               Jaeger built as a Go module serves no UI there, only a placeholder page)
{{- end}}
{{- if .MonitorURL}}
  Database     highly available: a primary and its synchronous standby, which the
               pg_auto_failover monitor promotes if the primary is lost. Which is which:
               psql '{{.MonitorURL}}' -c 'SELECT nodename, reportedstate FROM pgautofailover.node'
{{- end}}
  Data         {{if .State}}kept in {{.State}}: the database in {{.State.Postgres}},
               the Stripe stand-in's customers and charges in {{.State.StripeJournal}}{{else}}{{.State}}{{end}}

Metrics of each process (Prometheus text format):
{{range .Metrics}}  {{printf "%-12s" .Name}} {{.URL}}
{{end}}
Demo riders: {{.Rider.Email}} (card works), {{.Declined.Email}} (card declined).
Their tokens are shown only now. In another terminal, paste these first: admin, the simulator
and the client (cmd/rides) read them, and the commands below use them.

  export DATABASE_URL='{{.DatabaseURL}}'
  export STRIPE_API_KEY={{.StripeAPIKey}} STRIPE_API_URL={{.StripeURL}}
  export API_TOKEN_SECRET={{.TokenSecret}}
  export API_URL={{.APIURL}} RIDER={{.Rider.Token}} DECLINED={{.Declined.Token}}
{{- if .JaegerURL}}
  export JAEGER_URL={{.JaegerURL}}
{{- end}}

Book a ride: 201 Created. Send the same command again: the same 201, replayed
(Idempotent-Replayed: true), and Stripe still holds one charge.

  curl -i "$API_URL/rides" -H "Authorization: Bearer $RIDER" \
    -H "Idempotency-Key: my-first-ride-0000000001" \
    -d origin_lat=37.7749 -d origin_lon=-122.4194 -d target_lat=37.3382 -d target_lon=-121.8863
{{if .JaegerURL}}
Its trace is in Jaeger under its Idempotency-Key: one trace, from the API's request through
both atomic phases and the charge to the enqueuer and the worker's receipt, each span with its
service, name and tags (JSON):

  curl -sG "$JAEGER_URL/api/traces" -d service=api \
    --data-urlencode 'tags={"rocketrides.idempotency_key":"my-first-ride-0000000001"}'
{{end}}
A declined card: 402 card_declined. The refusal is final: sent again, it is replayed, and Stripe
is not asked twice.

  curl -i "$API_URL/rides" -H "Authorization: Bearer $DECLINED" \
    -H "Idempotency-Key: declined-ride-0000000001" -d origin_lat=0 -d origin_lon=0 -d target_lat=1 -d target_lon=1

A request that fails after its ride is created (raise_error): 500 internal_error, with the ride
recorded, nothing charged, and the key left at its recovery point ride_created. It recovers
either way:
  - send it again without "-d raise_error=true": it resumes at ride_created, charges once: 201;
  - or leave it: once it is 5 minutes old, the completer finishes it (the completer's log says
    "Completer: pushed keys" num_succeeded=1, and its metrics count
    rocketrides_completer_keys_total{result="succeeded"}); the same command then replays the 201.

  curl -i "$API_URL/rides" -H "Authorization: Bearer $RIDER" \
    -H "Idempotency-Key: flaky-ride-000000000001" -d origin_lat=0 -d origin_lon=0 -d target_lat=1 -d target_lon=1 -d raise_error=true

The client retries for you with one key and prints what became of the ride (its exit status
tells booked, refused and unknown apart; see "The Go client" in docs/api.md):

  go run ./cmd/rides -token "$RIDER" -from 37.7749,-122.4194 -to 37.3382,-121.8863

List your rides, newest first, a page at a time: 200, with the page's rides in "data" and
"has_more". While "has_more" is true, ask for the next page with starting_after=LAST_ID, the
"id" of the last ride of the page you have:

  curl -i "$API_URL/rides?limit=2" -H "Authorization: Bearer $RIDER"
  curl -i "$API_URL/rides?limit=2&starting_after=LAST_ID" -H "Authorization: Bearer $RIDER"

One ride (RIDE_ID: its "id", from the 201 or a page): 200 with the ride; another rider's
ride is 404 not_found.

  curl -i "$API_URL/rides/RIDE_ID" -H "Authorization: Bearer $RIDER"

Cancel a ride: 200, the ride cancelled and its charge refunded once, however often the same
command is sent; a cancel under another key: 409 ride_already_cancelled.

  curl -i -X POST "$API_URL/rides/RIDE_ID/cancel" -H "Authorization: Bearer $RIDER" \
    -H "Idempotency-Key: my-first-cancel-00000001"

Stripe tells the API what happens to its charges through a signed webhook. Refund the charge of
a ride you have not cancelled (CHARGE_ID: its "stripe_charge_id") as Stripe's dashboard would:
the stand-in posts charge.refunded to the API, whose log says "API: Stripe event received"
type=charge.refunded with the ride's ride_id, and GET /rides/RIDE_ID then shows
"status":"refunded".

  curl -X POST "$STRIPE_API_URL/_fakestripe/charges/CHARGE_ID/refund"

A dispute of another ride's charge arrives the same way (type=charge.dispute.created): the
ride shows "status":"disputed", and admin lists it for a person to answer.

  curl -X POST "$STRIPE_API_URL/_fakestripe/charges/CHARGE_ID/dispute"
  go run ./cmd/admin list-disputed

The simulator books a ride a second as ten new riders of its own; with SIMULATE_ERRORS=true one
ride in ten asks for raise_error, its client gives up, and the completer finishes it later:

  SIMULATE_ERRORS=true go run ./cmd/simulator
{{if .MonitorURL}}
Fail over on purpose, and watch the API ride through it. In a second terminal, keep the
simulator booking (without SIMULATE_ERRORS, every ride is booked):

  go run ./cmd/simulator

Then ask the monitor to promote the standby. Within seconds the query under "Database" shows
the two nodes swapped, and the simulator goes on logging "Simulator: ride booked": a ride caught
by the switch is answered 503 with Retry-After, its client retries it with the same key, and
its line says attempts above 1. No ride fails.

  psql '{{.MonitorURL}}' -c 'SELECT pgautofailover.perform_failover()'
{{end}}
Each rider may book 10 new rides a minute; beyond that, 429 booking_rate_limited with
Retry-After. A replay spends only the request budget (60 a minute). docs/api.md lists them all.
The worker writes each receipt email to its log. Ctrl-C stops everything.

`))

// banner renders bannerTemplate.
func banner(data bannerData) string {
	var b strings.Builder
	if err := bannerTemplate.Execute(&b, data); err != nil {
		// The template and its data are both this file's: an error is a bug.
		panic("dev: rendering the banner: " + err.Error())
	}
	return b.String()
}
