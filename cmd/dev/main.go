package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/devenv/jaeger"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// stripeAPIKey is what the processes charge with; the stand-in accepts any sk_test_ key.
const stripeAPIKey = "sk_test_rocketrides_dev"

// services are the long-running processes dev starts after setup, in start order.
var services = []string{"api", "worker", "enqueuer", "completer", "reaper"}

func main() {
	cli.Main("dev", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	})
}

// persistDirDefault is where -persist and -db-only keep their state, under the module's root.
const persistDirDefault = ".data"

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	flags := flag.NewFlagSet("dev", flag.ContinueOnError)
	persist := flags.Bool("persist", false, "keep the database and the Stripe stand-in's customers and charges in "+persistDirDefault+" between runs")
	dataDir := flags.String("data-dir", "", "keep them in this directory between runs (implies -persist): the database in DIR/"+postgresSubdir+", the stand-in's in DIR/"+stripeJournalFile)
	ha := flags.Bool("ha", false, "run PostgreSQL highly available: a pg_auto_failover monitor, a primary and its synchronous standby on loopback, "+
		"every process given their multi-host DATABASE_URL (needs Debian's postgresql-15-auto-failover and pg-auto-failover-cli)")
	dbOnly := flags.Bool("db-only", false, "run only PostgreSQL, migrated and kept in "+persistDirDefault+" (or -data-dir), where DATABASE_URL says (unset: PORT+601, as -env writes it)")
	traces := flags.Bool("traces", false, "run Jaeger on loopback, send every process's traces to it (OTEL_EXPORTER_OTLP_ENDPOINT), and show its UI in the banner "+
		"(the first run builds Jaeger, which takes minutes)")
	printEnv := flags.Bool("env", false, "print the Procfile path's .env, every port from PORT (with -ha, the formation's DATABASE_URL)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	port := api.PortDefault
	if v := getenv("PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535-procfileStripeOffset {
			return fmt.Errorf("PORT must be a port number up to %d, not %q", 65535-procfileStripeOffset, v)
		}
		port = p
	}
	if *printEnv {
		return writeProcfileEnv(stdout, port, *ha)
	}

	root, err := supervisor.ModuleRoot()
	if err != nil {
		return err
	}
	out := supervisor.NewPrefixWriter(stdout)
	logf := func(format string, args ...any) { out.Line("dev", fmt.Sprintf(format, args...)) }

	state := stateDir("")
	switch {
	case *dataDir != "":
		// Absolute, as Postgres runs in a directory of its own.
		abs, err := filepath.Abs(*dataDir)
		if err != nil {
			return err
		}
		state = stateDir(abs)
	case *persist || *dbOnly:
		state = stateDir(filepath.Join(root, persistDirDefault))
	}
	if *dbOnly {
		return runDatabaseOnly(ctx, state, getenv("DATABASE_URL"), port, *ha, stdout, logf)
	}
	if err := state.check(); err != nil {
		return err
	}
	// The one port of the stack that is not a free one: fail at once, before the build, if
	// another process has it.
	probe, err := bootstrap.Listen("PORT", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	probe.Close()

	binDir, err := os.MkdirTemp("", "rocketrides-dev-bin")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	logf("Building the commands")
	if err := supervisor.Build(ctx, root, binDir, append([]string{"migrate", "fakestripe", "admin"}, services...)...); err != nil {
		return err
	}

	// Jaeger outlives the processes that report to it (the defers run in reverse), so that the
	// spans they send as they stop arrive.
	var telemetryEnv []string
	var tracing *jaeger.Server
	if *traces {
		logf("Starting Jaeger (its first run builds it, which takes minutes)")
		if tracing, err = jaeger.Start(ctx, jaeger.Config{Root: root, Output: newLineWriter(out, "jaeger")}); err != nil {
			return err
		}
		defer func() {
			logf("Stopping Jaeger")
			if err := tracing.Stop(); err != nil {
				logf("%s", err)
			}
		}()
		telemetryEnv = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + tracing.OTLPEndpoint}
	}

	db, err := startDatabase(ctx, state, *ha, 0, databaseName, logf)
	if err != nil {
		return err
	}
	defer func() {
		logf("Stopping PostgreSQL")
		_ = db.stop(context.WithoutCancel(ctx))
	}()
	databaseURL := db.url

	sup := supervisor.New(binDir, out)
	defer func() {
		if err := sup.StopAll(); err != nil {
			logf("%s", err)
		}
	}()

	baseEnv := append([]string{"DATABASE_URL=" + databaseURL}, telemetryEnv...)
	if err := sup.RunToEnd(ctx, "migrate", baseEnv, "up"); err != nil {
		return err
	}

	stripeArgs := []string{"-addr", "127.0.0.1:0"}
	if journal := state.StripeJournal(); journal != "" {
		stripeArgs = append(stripeArgs, "-journal", journal)
	}
	// The stand-in signs its webhooks with the secret the API verifies them with.
	webhooks := []string{"STRIPE_WEBHOOK_SECRET=" + devWebhookSecret,
		fmt.Sprintf("STRIPE_WEBHOOK_URL=http://127.0.0.1:%d/webhooks/stripe", port)}
	stripe, err := sup.Start("", "fakestripe", webhooks, stripeArgs...)
	if err != nil {
		return err
	}
	stripeURL, err := stripe.FirstLine(ctx, "http://")
	if err != nil {
		return fmt.Errorf("error starting the Stripe stand-in: %w", err)
	}
	env := append(baseEnv,
		"STRIPE_API_KEY="+stripeAPIKey,
		"API_TOKEN_SECRET="+devTokenSecret,
		"STRIPE_API_URL="+stripeURL,
		webhooks[0],
		"PORT="+strconv.Itoa(port),
		"HOST=127.0.0.1", // as the banner says: this machine alone reaches the demo stack
		// The demo parameter raise_error shows recovery from a failure; allowed in dev only.
		"SIMULATE_ERRORS=true",
	)

	rider, err := createDemoRider(ctx, sup, env, "rider", "tok_visa")
	if err != nil {
		return err
	}
	declined, err := createDemoRider(ctx, sup, env, "declined", "tok_chargeCustomerFail")
	if err != nil {
		return err
	}

	// Every process serves its metrics on a loopback port of its own, so that all are there at once.
	metrics := make([]metricsEndpoint, len(services))
	for i, name := range services {
		port, err := supervisor.FreePort()
		if err != nil {
			return err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		metrics[i] = metricsEndpoint{Name: name, URL: "http://" + addr + "/metrics"}
		if _, err := sup.Start("", name, append(slices.Clip(env), "METRICS_ADDR="+addr)); err != nil {
			return err
		}
	}

	// River's UI, on loopback with no login, as the Procfile's ui line runs it.
	uiPort, err := supervisor.FreePort()
	if err != nil {
		return err
	}
	uiURL := fmt.Sprintf("http://127.0.0.1:%d/", uiPort)
	if _, err := sup.Start("ui", "admin", append(slices.Clip(env), fmt.Sprintf("UI_ADDR=127.0.0.1:%d", uiPort)), "ui"); err != nil {
		return err
	}

	// The banner's lines work once it shows: the API is ready, every process serves its
	// metrics, and River's UI answers.
	if err := waitOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), sup); err != nil {
		return err
	}
	if err := waitOK(ctx, uiURL+"api/health-checks/complete", sup); err != nil {
		return err
	}
	for _, m := range metrics {
		if err := waitOK(ctx, m.URL, sup); err != nil {
			return err
		}
	}
	data := bannerData{
		APIURL: fmt.Sprintf("http://localhost:%d", port), DatabaseURL: databaseURL, MonitorURL: db.monitorURL, StripeAPIKey: stripeAPIKey, TokenSecret: devTokenSecret, StripeURL: stripeURL,
		State: state, Rider: rider, Declined: declined, Metrics: metrics, UIURL: uiURL,
	}
	var tracingExited <-chan struct{} // nil without -traces: never ready
	if tracing != nil {
		data.JaegerURL, tracingExited = tracing.QueryURL, tracing.Exited()
	}
	fmt.Fprint(stdout, banner(data))

	select {
	case <-ctx.Done():
		logf("Stopping")
		return nil
	case p := <-sup.Exited():
		return fmt.Errorf("%s exited unexpectedly: %v", p.Name, p.Err())
	case <-tracingExited:
		return errors.New("jaeger exited unexpectedly")
	}
}

// waitOK waits for url to answer 200, for up to 30 s, unless a process of sup exits meanwhile.
func waitOK(ctx context.Context, url string, sup *supervisor.Supervisor) error {
	return supervisor.WaitOK(ctx, url, 30*time.Second, func() error {
		select {
		case p := <-sup.Exited():
			return fmt.Errorf("%s exited while starting: %v", p.Name, p.Err())
		default:
			return nil
		}
	})
}

// createDemoRider creates a rider with a fresh Stripe customer. Its token is shown only once, so
// each run makes new demo riders; the email carries the process id so that a kept database,
// which holds the riders of earlier runs (and their tokens still work), takes them.
func createDemoRider(ctx context.Context, sup *supervisor.Supervisor, env []string, name, card string) (*supervisor.Rider, error) {
	return sup.CreateRider(ctx, env, fmt.Sprintf("%s+%d@rocketrides.example", name, os.Getpid()), card)
}
