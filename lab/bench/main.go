package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// attemptTimeout bounds one HTTP attempt, as the client's own default HTTP client does; the
// server gives a ride request up to 45 s.
const attemptTimeout = time.Minute

// readyTimeout bounds the check that the API is up before the load starts, so that a wrong
// -api fails at once rather than after every client has retried for -give-up-after.
const readyTimeout = 5 * time.Second

// maxFailuresShown caps the failures printed after the table; the counts say how many in all.
const maxFailuresShown = 10

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Defaults of -clients: the load generator's, and the comparison's, whose point is many riders
// at once against a durable database.
const (
	loadClientsDefault    = 16
	compareClientsDefault = 32
)

// The modes, the load generator's being the default.
const (
	modeLoad         = "load"
	modeCompare      = "compare"
	modeCompareHA    = "compare-ha"
	modeCompareCitus = "compare-citus"
	modeReceipts     = "receipts"
)

// options are the command line.
type options struct {
	mode         string
	apiPoolConns int
	serverLog    string
	apiURL       string
	token        string
	clients      int
	duration     time.Duration
	calls        int
	replayShare  float64
	giveUpAfter  time.Duration

	// Only with -compare.
	soloDuration time.Duration
	pin          pinMode
	rides        int
	riders       int
	// baselineRev is -baseline as given; baseline is that revision resolved.
	baselineRev string
	baseline    *baseline

	// baselineFirst runs the baseline right before the API instead of right after it.
	baselineFirst bool

	// rounds, with a baseline, is how many more pairs of runs of the API and the baseline follow
	// the targets' runs, at the most clients, in turns (see rounds.go).
	rounds int

	// Only with -receipts.
	bookings      int
	idle          time.Duration
	stripeLatency time.Duration
}

// modeFlags are the flags each mode reads, its own switch aside: setting another is a mistake
// worth saying, not a setting to ignore.
var modeFlags = map[string][]string{
	modeLoad:         {"api", "token", "clients", "duration", "calls", "replay-share", "give-up-after"},
	modeCompare:      {"compare", "clients", "duration", "give-up-after", "solo-duration", "rides", "riders", "api-pool", "server-log", "pin", "baseline", "baseline-first", "rounds"},
	modeCompareHA:    {"compare-ha", "clients", "duration", "give-up-after", "rides", "riders", "api-pool"},
	modeCompareCitus: {"compare-citus", "clients", "duration", "give-up-after", "rides", "riders", "api-pool"},
	modeReceipts:     {"receipts", "bookings", "idle", "stripe-latency"},
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	opts, err := parseOptions(args, getenv, stderr)
	if err == nil && opts.baselineRev != "" {
		// Resolved now, so that a revision that does not resolve is a usage error, not a failure
		// after the databases are filled.
		var root string
		if root, err = supervisor.ModuleRoot(); err == nil {
			opts.baseline, err = resolveBaseline(ctx, root, opts.baselineRev)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitUsage
	}
	switch opts.mode {
	case modeCompare:
		return runCompare(ctx, opts, stdout, stderr)
	case modeReceipts:
		return runReceipts(ctx, opts, stdout, stderr)
	case modeCompareHA:
		return runCompareHA(ctx, opts, stdout, stderr)
	case modeCompareCitus:
		return runCompareCitus(ctx, opts, stdout, stderr)
	}
	return runLoad(ctx, opts, stdout, stderr)
}

// runLoad loads the API at -api as the one rider whose token is -token.
func runLoad(ctx context.Context, opts *options, stdout, stderr io.Writer) int {
	httpClient, counter := newHTTPClient(opts.clients)
	if err := checkReady(ctx, httpClient, opts.apiURL); err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}

	c := &client.Client{BaseURL: opts.apiURL, Token: opts.token, HTTPClient: httpClient, MaxElapsed: opts.giveUpAfter}
	clients := make([]*client.Client, opts.clients)
	for i := range clients {
		clients[i] = c
	}
	res := load(ctx, clients, counter, opts.duration, opts.calls, opts.replayShare)
	res.print(stdout, opts)
	if res.failed() {
		return exitFailed
	}
	return exitOK
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	flags := flag.NewFlagSet("bench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	opts := &options{}
	var compare, compareHA, compareCitus, receipts bool
	flags.BoolVar(&compare, "compare", false, "start a cluster, the API and pgbench, and compare them (needs nothing running)")
	flags.BoolVar(&compareHA, "compare-ha", false, "run the API and pgbench's twotx on a single node, then on a primary with a synchronous standby, and compare (needs nothing running but pg_auto_failover installed)")
	flags.BoolVar(&compareCitus, "compare-citus", false, "run the API and pgbench's twotx on a single Postgres, then on a Citus coordinator and two workers on this machine, and compare (needs nothing running but Citus installed)")
	flags.BoolVar(&receipts, "receipts", false, "start a cluster and the Procfile's processes, and time receipts from booking to mail server (needs nothing running)")
	flags.StringVar(&opts.apiURL, "api", cmp.Or(getenv("API_URL"), client.DefaultBaseURL), "the API's base URL (API_URL)")
	flags.StringVar(&opts.token, "token", getenv("RIDES_TOKEN"), "the rider's API token (RIDES_TOKEN)")
	flags.IntVar(&opts.clients, "clients", 0, fmt.Sprintf("concurrent clients, each making one call at a time (default %d, with -compare %d)",
		loadClientsDefault, compareClientsDefault))
	flags.DurationVar(&opts.duration, "duration", 30*time.Second, "how long to start new calls; calls under way then run to their end")
	flags.IntVar(&opts.calls, "calls", 0, "stop each client after this many calls, or at -duration, whichever comes first (0: at -duration)")
	flags.Float64Var(&opts.replayShare, "replay-share", 0, "share of calls, in [0, 1), that re-send one of the client's earlier keys")
	flags.DurationVar(&opts.giveUpAfter, "give-up-after", client.DefaultMaxElapsed, "how long one call keeps retrying before its outcome is unknown")
	flags.DurationVar(&opts.soloDuration, "solo-duration", 10*time.Second, "with -compare: how long the 1-client runs last")
	flags.IntVar(&opts.rides, "rides", 300_000, "with -compare: rides of history in each database before the runs (0: none)")
	flags.IntVar(&opts.riders, "riders", 1000, "with -compare: riders those rides belong to")
	flags.StringVar(&opts.serverLog, "server-log", "", "with -compare: write Postgres's own log to this file, serialization failures with their statements")
	flags.Var(&opts.pin, "pin", "with -compare: run Postgres on half the CPUs and everything else on the others (-pin), or shared and then so (-pin=both)")
	flags.StringVar(&opts.baselineRev, "baseline", "", "with -compare: also run cmd/api as built from this git revision of the repository, right after the API (a commit, tag or branch)")
	flags.BoolVar(&opts.baselineFirst, "baseline-first", false, "with -baseline: run the baseline right before the API, not after it, to see what the order alone changes")
	flags.IntVar(&opts.rounds, "rounds", 0, "with -baseline: then run the API and the baseline this many more times each at the most clients, in turns (A B B A ...), and print each pair's ratios and their spread")
	flags.IntVar(&opts.apiPoolConns, "api-pool", 0, "with -compare: the API's pool_max_conns (0: the API's default, PoolMaxConnsDefault in cmd/internal/bootstrap)")
	flags.IntVar(&opts.bookings, "bookings", receiptBookingsDefault, "with -receipts: rides booked one after another, each receipt timed")
	flags.DurationVar(&opts.stripeLatency, "stripe-latency", 0, "with -receipts: how long the Stripe stand-in takes to answer (0: at once, so that bookings come as fast as they can)")
	flags.DurationVar(&opts.idle, "idle", receiptIdleDefault, "with -receipts: how long to count the idle stack's statements afterwards (0: not at all)")
	if err := flags.Parse(args); err != nil {
		return nil, err
	}
	opts.mode = modeLoad
	switch {
	case countTrue(compare, compareHA, compareCitus, receipts) > 1:
		return nil, errors.New("-compare, -compare-ha, -compare-citus and -receipts exclude each other")
	case compare:
		opts.mode = modeCompare
	case compareHA:
		opts.mode = modeCompareHA
	case compareCitus:
		opts.mode = modeCompareCitus
	case receipts:
		opts.mode = modeReceipts
	}
	set := map[string]bool{}
	var misplaced []string
	flags.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if !slices.Contains(modeFlags[opts.mode], f.Name) {
			misplaced = append(misplaced, f.Name)
		}
	})
	if len(misplaced) > 0 {
		return nil, fmt.Errorf("-%s does not apply to the %s mode", misplaced[0], opts.mode)
	}
	if !set["clients"] {
		opts.clients = loadClientsDefault
		if isComparison(opts.mode) {
			opts.clients = compareClientsDefault
		}
	}

	switch {
	case flags.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments %q", flags.Args())
	case opts.mode == modeLoad && opts.token == "":
		return nil, errors.New("-token (or RIDES_TOKEN) is required")
	case opts.baselineFirst && opts.baselineRev == "":
		return nil, errors.New("-baseline-first needs -baseline")
	case opts.rounds != 0 && opts.baselineRev == "":
		return nil, errors.New("-rounds needs -baseline")
	case opts.rounds < 0:
		return nil, errors.New("-rounds must be at least 0")
	case opts.clients < 1:
		return nil, errors.New("-clients must be at least 1")
	case opts.calls < 0:
		return nil, errors.New("-calls must be at least 0")
	case opts.duration <= 0:
		return nil, errors.New("-duration must be positive")
	case !(opts.replayShare >= 0 && opts.replayShare < 1):
		return nil, errors.New("-replay-share must be in [0, 1)")
	case opts.giveUpAfter <= 0:
		return nil, errors.New("-give-up-after must be positive")
	case opts.soloDuration <= 0:
		return nil, errors.New("-solo-duration must be positive")
	case isComparison(opts.mode) && (opts.duration%time.Second != 0 || opts.soloDuration%time.Second != 0):
		return nil, errors.New("-duration and -solo-duration must be whole seconds with -compare, as pgbench -T takes them")
	case opts.rides < 0 || opts.riders < 0:
		return nil, errors.New("-rides and -riders must not be negative")
	case opts.rides > 0 && opts.riders == 0:
		return nil, errors.New("-rides needs at least one of -riders to belong to")
	case opts.bookings < 1:
		return nil, errors.New("-bookings must be at least 1")
	case opts.idle < 0 || opts.stripeLatency < 0:
		return nil, errors.New("-idle and -stripe-latency must not be negative")
	}
	return opts, nil
}

// isComparison reports whether mode is one of the comparisons, which start their own cluster
// and run pgbench, whose -T takes whole seconds.
func isComparison(mode string) bool {
	return mode == modeCompare || mode == modeCompareHA || mode == modeCompareCitus
}

// countTrue counts the switches that are set.
func countTrue(switches ...bool) int {
	n := 0
	for _, on := range switches {
		if on {
			n++
		}
	}
	return n
}

// newTransport keeps a connection per client alive. http.DefaultTransport keeps only two idle
// connections per host, so most clients would open a new connection for every attempt, and
// the figures would measure TCP set-up as much as the API.
func newTransport(clients int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = clients
	t.MaxIdleConnsPerHost = clients
	return t
}

// checkReady asks GET /readyz once: the API is up and reaches its database.
func checkReady(ctx context.Context, httpClient *http.Client, apiURL string) error {
	endpoint, err := url.JoinPath(apiURL, "readyz")
	if err != nil {
		return fmt.Errorf("error parsing -api: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return fmt.Errorf("error building the readiness request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("error reaching the API (is it running at %s?): %w", apiURL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // so that the connection is reused
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the API at %s is not ready: GET /readyz answered %d", apiURL, resp.StatusCode)
	}
	return nil
}
