// Command dev runs the whole Rocket Rides service on one machine with nothing but Go and the
// PostgreSQL server binaries installed:
//
//	go run ./cmd/dev            # throwaway database, gone on exit
//	go run ./cmd/dev -persist   # database kept in .data/postgres between runs
//	go run ./cmd/dev -data-dir DIR
//
// It starts a PostgreSQL cluster, migrates it, starts the Stripe stand-in, creates two demo
// riders (one whose card works, one whose card is declined), and runs the API, worker,
// enqueuer, completer and reaper as separate processes, the way a Procfile manager would, with
// their output prefixed by name. Ctrl-C stops all of it and leaves no process behind.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/pgcluster"
	"github.com/rocketrides/rocketrides/internal/supervisor"
)

// databaseName is the database dev creates in its cluster.
const databaseName = "rocketrides"

// stripeAPIKey is what the processes charge with; the stand-in accepts any sk_test_ key.
const stripeAPIKey = "sk_test_rocketrides_dev"

// services are the long-running processes dev starts after setup, in start order.
var services = []string{"api", "worker", "enqueuer", "completer", "reaper"}

func main() {
	bootstrap.Main("dev", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	})
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	flags := flag.NewFlagSet("dev", flag.ContinueOnError)
	persist := flags.Bool("persist", false, "keep the database in .data/postgres between runs")
	dataDir := flags.String("data-dir", "", "keep the database in this directory between runs (implies -persist)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	port := 5004
	if v := getenv("PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("PORT must be a port number, not %q", v)
		}
		port = p
	}

	root, err := supervisor.ModuleRoot()
	if err != nil {
		return err
	}
	out := supervisor.NewPrefixWriter(stdout)
	logf := func(format string, args ...any) { out.Line("dev", fmt.Sprintf(format, args...)) }

	binDir, err := os.MkdirTemp("", "rocketrides-dev-bin")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	logf("Building the commands")
	if err := supervisor.Build(ctx, root, binDir, append([]string{"migrate", "fakestripe", "admin"}, services...)...); err != nil {
		return err
	}

	if *persist && *dataDir == "" {
		*dataDir = filepath.Join(root, ".data", "postgres")
	}
	cluster, databaseURL, err := startDatabase(ctx, *dataDir, logf)
	if err != nil {
		return err
	}
	defer func() {
		logf("Stopping PostgreSQL")
		_ = cluster.Stop(context.WithoutCancel(ctx))
	}()

	sup := supervisor.New(binDir, out)
	defer func() {
		if err := sup.StopAll(); err != nil {
			logf("%s", err)
		}
	}()

	baseEnv := []string{"DATABASE_URL=" + databaseURL}
	if err := sup.RunToEnd(ctx, "migrate", baseEnv, "up"); err != nil {
		return err
	}

	stripe, err := sup.Start("", "fakestripe", nil, "-addr", "127.0.0.1:0")
	if err != nil {
		return err
	}
	stripeURL, err := stripe.FirstLine(ctx, "http://")
	if err != nil {
		return fmt.Errorf("error starting the Stripe stand-in: %w", err)
	}
	env := append(baseEnv,
		"STRIPE_API_KEY="+stripeAPIKey,
		"STRIPE_API_URL="+stripeURL,
		"PORT="+strconv.Itoa(port),
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
		addr, err := freeLoopbackAddr()
		if err != nil {
			return err
		}
		metrics[i] = metricsEndpoint{name: name, url: "http://" + addr + "/metrics"}
		if _, err := sup.Start("", name, append(slices.Clip(env), "METRICS_ADDR="+addr)); err != nil {
			return err
		}
	}

	// The banner's lines work once it shows: the API is ready and every process serves its metrics.
	if err := waitOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), sup); err != nil {
		return err
	}
	for _, m := range metrics {
		if err := waitOK(ctx, m.url, sup); err != nil {
			return err
		}
	}
	fmt.Fprint(stdout, banner(port, databaseURL, stripeURL, rider, declined, metrics))

	select {
	case <-ctx.Done():
		logf("Stopping")
		return nil
	case p := <-sup.Exited():
		return fmt.Errorf("%s exited unexpectedly: %v", p.Name, p.Err())
	}
}

// waitOK waits until url answers 200, giving up if a process exits first.
func waitOK(ctx context.Context, url string, sup *supervisor.Supervisor) error {
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-sup.Exited():
			return fmt.Errorf("%s exited while starting: %v", p.Name, p.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer within 30 s", url)
}

// freeLoopbackAddr returns a loopback address whose port was free a moment ago, for a process to
// listen on. The process fails at start, saying so, in the unlikely case that another took it
// in between.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("error finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startDatabase starts the cluster, in dataDir if set and in a throwaway directory if not, and
// creates the database if it does not exist yet.
func startDatabase(ctx context.Context, dataDir string, logf func(string, ...any)) (*pgcluster.Cluster, string, error) {
	cfg := pgcluster.Config{Logger: slog.New(slog.DiscardHandler)}
	if dataDir != "" {
		cfg.DataDir = dataDir
		// A database that outlives the process gets durability back.
		cfg.Settings = map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
		if err := os.MkdirAll(filepath.Dir(cfg.DataDir), 0o755); err != nil {
			return nil, "", err
		}
	}
	logf("Starting PostgreSQL (data in %s)", dataDirLabel(cfg.DataDir))
	cluster, err := pgcluster.Start(ctx, cfg)
	if err != nil {
		return nil, "", err
	}

	conn, err := pgx.Connect(ctx, cluster.URL("postgres"))
	if err != nil {
		_ = cluster.Stop(ctx)
		return nil, "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, databaseName).Scan(&exists); err != nil {
		_ = cluster.Stop(ctx)
		return nil, "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+databaseName); err != nil {
			_ = cluster.Stop(ctx)
			return nil, "", fmt.Errorf("error creating database: %w", err)
		}
	}
	return cluster, cluster.URL(databaseName), nil
}

func dataDirLabel(dir string) string {
	if dir == "" {
		return "a temporary directory, removed on exit"
	}
	return dir
}

// demoRider is what create-user printed.
type demoRider struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
	Token string `json:"token"`
}

// createDemoRider creates a rider with a fresh Stripe customer. Emails carry the process id so
// that a persistent database, which keeps the riders of earlier runs, takes new ones: the Stripe
// stand-in starts empty each run and would not know the old riders' customers.
func createDemoRider(ctx context.Context, sup *supervisor.Supervisor, env []string, name, card string) (*demoRider, error) {
	email := fmt.Sprintf("%s+%d@rocketrides.example", name, os.Getpid())
	out, err := sup.Output(ctx, "admin", env, "create-user", "-email", email, "-card", card)
	if err != nil {
		return nil, err
	}
	var rider demoRider
	if err := json.Unmarshal(out, &rider); err != nil {
		return nil, fmt.Errorf("error reading create-user output %q: %w", out, err)
	}
	return &rider, nil
}

// metricsEndpoint is where one process serves its Prometheus metrics.
type metricsEndpoint struct {
	name string
	url  string
}

func banner(port int, databaseURL, stripeURL string, rider, declined *demoRider, metrics []metricsEndpoint) string {
	var endpoints strings.Builder
	for _, m := range metrics {
		fmt.Fprintf(&endpoints, "  %-12s %s\n", m.name, m.url)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `
Rocket Rides is running.

  API          http://localhost:%[1]d
  Stripe       %[3]s (stand-in)
  DATABASE_URL %[2]s

Metrics of each process (Prometheus text format):
%[8]s
Demo riders (tokens are shown only now):
  %[4]s  RIDER=%[5]s
  %[6]s  DECLINED=%[7]s

Try it (run the same command twice: the second answer is a replay):

  curl -i http://localhost:%[1]d/rides -H "Authorization: Bearer %[5]s" \
    -H "Idempotency-Key: my-first-ride-0000000001" \
    -d origin_lat=37.7749 -d origin_lon=-122.4194 -d target_lat=37.3382 -d target_lon=-121.8863

  # a declined card (402), and a request that fails after ride_created (500) then recovers:
  curl -i http://localhost:%[1]d/rides -H "Authorization: Bearer %[7]s" \
    -H "Idempotency-Key: declined-ride-0000000001" -d origin_lat=0 -d origin_lon=0 -d target_lat=1 -d target_lon=1
  curl -i http://localhost:%[1]d/rides -H "Authorization: Bearer %[5]s" \
    -H "Idempotency-Key: flaky-ride-000000000001" -d origin_lat=0 -d origin_lon=0 -d target_lat=1 -d target_lon=1 -d raise_error=true

The worker writes each receipt email to its log. Ctrl-C stops everything.

`, port, databaseURL, stripeURL, rider.Email, rider.Token, declined.Email, declined.Token, endpoints.String())
	return b.String()
}
