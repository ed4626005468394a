package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/devenv/hacluster"
	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/phases"
)

// The stack's timing, shrunk from production's so that a soak of a minute sees every recovery
// path many times over.
const (
	// The lock lease is the default one (phases.LockLeaseDefault): a killed API's keys are free
	// again within it, as in production.
	//
	// stripeTimeout is what a timeout fault costs a request.
	stripeTimeout = 1500 * time.Millisecond
	// completerMinAge and completerIdleFor make the completer take on a key whose client has
	// been gone for a few seconds: it races live clients, which is part of the test.
	completerMinAge  = 3 * time.Second
	completerIdleFor = 2 * time.Second
	completerPause   = 500 * time.Millisecond
	// enqueuerPoll is the fallback for a NOTIFY lost while the database restarted.
	enqueuerPoll = 500 * time.Millisecond
	// stallFor and freezeFor outlast the lease by enough for the completer (which looks every
	// completerPause) to take a key over whose lease ran out. A stalled request is alive and
	// renews its lease, so nobody may take its key over; a frozen process (SIGSTOP) renews
	// nothing, so its requests' keys are taken over, and when it thaws, fencing must stop them
	// from committing anything. Both stay under the 10 s a SIGTERM'd API has to exit and under
	// the clients' attemptTimeout.
	stallFor  = phases.LockLeaseDefault + 2500*time.Millisecond
	freezeFor = phases.LockLeaseDefault + 2500*time.Millisecond
	// reaperInterval has the reaper at work every few seconds, through every fault; with the
	// default age (72 h) it finds nothing to reap, but it must never break, nor exit.
	reaperInterval = 2 * time.Second
	// readyTimeout bounds waiting for the first start of the APIs.
	readyTimeout = 30 * time.Second
)

// numRiders riders with working cards share the clients, plus one whose card is declined, so
// that definitive refusals are part of the mix.
const numRiders = 4

// stack is the running service: a database, the Stripe stand-in, a mail server, and the
// processes of Rocket Rides, each kept running by a service.
type stack struct {
	cfg         *config
	binDir      string
	sup         *supervisor.Supervisor
	cluster     *pgcluster.Cluster
	formation   *hacluster.Formation // with -ha, instead of cluster
	databaseURL string
	pool        *pgxpool.Pool // the harness's own connections, for watching and checking
	stripe      *stripeControl
	smtp        *smtptest.Server
	baseEnv     []string

	riders   []rider
	declined rider

	apis       []*service
	apiPorts   []int
	background []*service // workers, enqueuer, completer
}

// rider is a rider that admin create-user made.
type rider = supervisor.Rider

// startStack builds the commands and starts everything. On error, what was started is stopped.
func startStack(ctx context.Context, cfg *config, events *eventLog, progress func(string, ...any)) (_ *stack, err error) {
	st := &stack{cfg: cfg}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.close())
		}
	}()

	root, err := supervisor.ModuleRoot()
	if err != nil {
		return nil, err
	}
	if st.binDir, err = os.MkdirTemp("", "rocketrides-chaos-bin"); err != nil {
		return nil, fmt.Errorf("error creating directory for binaries: %w", err)
	}
	if err := supervisor.Build(ctx, root, st.binDir, "migrate", "fakestripe", "admin", "api", "worker", "enqueuer", "completer", "reaper"); err != nil {
		return nil, err
	}
	out := supervisor.NewPrefixWriter(events)
	st.sup = supervisor.New(st.binDir, out)
	// Nobody waits on Exited: the services watch their own processes. Draining it keeps the
	// supervisor's goroutines from piling up on a full channel.
	go func() {
		for range st.sup.Exited() {
		}
	}()

	if err := st.startDatabase(ctx, labelledWriter{out, "postgres"}); err != nil {
		return nil, err
	}
	if st.smtp, err = smtptest.Start(smtptest.Options{}); err != nil {
		return nil, fmt.Errorf("error starting the mail server: %w", err)
	}

	st.baseEnv = []string{"DATABASE_URL=" + st.databaseURL}
	if err := st.sup.RunToEnd(ctx, "migrate", st.baseEnv, "up"); err != nil {
		return nil, err
	}
	if st.pool, err = pgxpool.New(ctx, st.databaseURL); err != nil {
		return nil, fmt.Errorf("error opening pool: %w", err)
	}

	for range cfg.apis {
		port, err := supervisor.FreePort() // kept across restarts, so that clients find it again
		if err != nil {
			return nil, err
		}
		st.apiPorts = append(st.apiPorts, port)
	}
	// Stripe delivers its events to the first API, whose crashes and freezes it rides out by
	// retrying, as Stripe does an endpoint that is down.
	stripe, err := st.sup.Start("", "fakestripe", []string{
		"STRIPE_WEBHOOK_URL=http://" + st.apiHosts()[0] + "/webhooks/stripe",
		"STRIPE_WEBHOOK_SECRET=" + webhookSecret,
	}, "-addr", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	stripeURL, err := stripe.FirstLine(ctx, "http://")
	if err != nil {
		return nil, fmt.Errorf("error starting the Stripe stand-in: %w", err)
	}
	st.stripe = newStripeControl(stripeURL)
	if err := st.stripe.setWebhookBehavior(ctx, soakWebhookBehavior); err != nil {
		return nil, err
	}

	st.baseEnv = append(st.baseEnv,
		"STRIPE_API_KEY=sk_test_rocketrides_chaos",
		"API_TOKEN_SECRET="+tokenSecret,
		"STRIPE_WEBHOOK_SECRET="+webhookSecret,
		"STRIPE_API_URL="+stripeURL,
		"SMTP_URL="+st.smtp.URL(),
		"STRIPE_TIMEOUT="+stripeTimeout.String(),
		"COMPLETER_MIN_AGE="+completerMinAge.String(),
		"COMPLETER_IDLE_FOR="+completerIdleFor.String(),
		"COMPLETER_INTERVAL="+completerPause.String(),
		"ENQUEUER_POLL_INTERVAL="+enqueuerPoll.String(),
		"REAPER_INTERVAL="+reaperInterval.String(),
		"LOG_FORMAT=text", // event_log.go reads the text format
		// A soak sends each rider far more rides than the API's limits allow; it tests what
		// failures do to requests, not the limits (api's own tests do).
		"RATE_LIMITS=off",
	)
	if err := st.createRiders(ctx); err != nil {
		return nil, err
	}

	for i := range cfg.apis {
		env, envsAfterCrash := st.soakAPIEnv(i)
		api := newService(st.sup, events, fmt.Sprintf("api-%d", i+1), "api", env)
		api.envsAfterCrash = envsAfterCrash
		st.apis = append(st.apis, api)
		if err := api.start(); err != nil {
			return nil, err
		}
	}
	names := []string{"enqueuer", "completer", "reaper"}
	for range cfg.workers {
		names = append(names, "worker")
	}
	workers := 0
	for _, name := range names {
		label := name
		if name == "worker" {
			workers++
			label = fmt.Sprintf("worker-%d", workers)
		}
		svc := newService(st.sup, events, label, name, st.baseEnv)
		st.background = append(st.background, svc)
		if err := svc.start(); err != nil {
			return nil, err
		}
	}
	if err := st.waitReady(ctx); err != nil {
		return nil, err
	}
	// A stack that cannot come up cleanly is not worth soaking.
	for _, svc := range st.services() {
		if c := svc.counts(); c.unexpectedExits > 0 {
			return nil, fmt.Errorf("%s exited while the stack was starting; see the log", svc.label)
		}
	}
	progress("stack up: %d APIs on ports %v, %d workers, enqueuer, completer, reaper; Stripe stand-in at %s, mail at %s",
		len(st.apis), st.apiPorts, cfg.workers, stripeURL, st.smtp.Addr)
	return st, nil
}

// soakAPIEnv is the environment the i-th API soaks in, faults armed, and the environments it
// restarts with after each of its crashes (envsAfterCrash; nil for an API that keeps env). The
// first API crashes for certain at each of forcedCrashPoints in turn, the next only once it
// crashed at the one before, and then by chance alone.
func (st *stack) soakAPIEnv(i int) (env []string, envsAfterCrash [][]string) {
	if i != 0 {
		return st.apiEnv(i, true, ""), nil
	}
	env = st.apiEnv(i, true, forcedCrashPoints[0])
	for _, point := range forcedCrashPoints[1:] {
		envsAfterCrash = append(envsAfterCrash, st.apiEnv(i, true, point))
	}
	return env, append(envsAfterCrash, st.apiEnv(i, true, ""))
}

// apiEnv is the environment of the i-th API, with its fault points armed when faulty. The
// replicas take turns between two profiles. The first crashes at every fault point, of a
// booking and of a cancel. The second stalls once Stripe has answered a charge or a refund, for
// longer than the lease: the stalled request is alive and keeps renewing its lease, so it must
// keep its key and finish it. (Takeovers and fencing come from the api_freeze fault.) It does
// not crash, or it would rarely live to the end of a stall.
//
// forceCrash, unless empty, replaces the crashing profile with a crash at that point for
// certain, and nowhere else, so that no crash by chance comes first (see soakAPIEnv).
func (st *stack) apiEnv(i int, faulty bool, forceCrash phases.FaultPoint) []string {
	env := append(append([]string(nil), st.baseEnv...), "PORT="+strconv.Itoa(st.apiPorts[i]))
	if !faulty || st.cfg.crashProb == 0 {
		return env
	}
	p := strconv.FormatFloat(st.cfg.crashProb, 'g', -1, 64)
	if i%2 == 0 {
		if forceCrash != "" {
			return append(env, "FAULTS="+string(forceCrash)+"=crash")
		}
		var rules []string
		for _, point := range []phases.FaultPoint{
			phases.FaultPointRideCreated, phases.FaultPointChargeAnswered, phases.FaultPointFinished,
			phases.FaultPointCancelClaimed, phases.FaultPointRefundAnswered,
		} {
			rules = append(rules, string(point)+"=crash@"+p)
		}
		return append(env, "FAULTS="+strings.Join(rules, ","))
	}
	return append(env, fmt.Sprintf("FAULTS=charge_answered=stall:%[2]s@%[1]s,refund_answered=stall:%[2]s@%[1]s", p, stallFor))
}

// forcedCrashPoints are where the first API crashes for certain, one after the other: on its
// first request that gets to the first point, then, restarted, on its first that gets to the
// second. Crashes at the fault points are drawn by chance (-crash-prob), and a soak that drew
// none would have tested none; a crash with Stripe's charge taken and not yet recorded is the
// one the article is about, and its twin with Stripe's refund made and not yet recorded the
// cancel's.
var forcedCrashPoints = []phases.FaultPoint{phases.FaultPointChargeAnswered, phases.FaultPointRefundAnswered}

// webhookSecret is the signing secret of the API's webhook endpoint, which the stand-in signs
// its deliveries with.
const webhookSecret = "whsec_rocketrides_chaos"

// tokenSecret is the stack's API_TOKEN_SECRET, the API's and admin's.
const tokenSecret = "rocketrides-chaos-token-secret-not-for-production"

// soakWebhookBehavior is how Stripe delivers events while the soak runs: every event twice, and
// in pairs newest first, as Stripe may; settle turns both off.
var soakWebhookBehavior = webhookBehavior{Duplicate: 1, Reorder: true, ReorderWindowMS: 500}

// services are every process of Rocket Rides: the APIs, then the others.
func (st *stack) services() []*service {
	return append(append([]*service(nil), st.apis...), st.background...)
}

// apiHosts are the APIs' host:port, for the clients.
func (st *stack) apiHosts() []string {
	hosts := make([]string, len(st.apiPorts))
	for i, port := range st.apiPorts {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return hosts
}

func (st *stack) startDatabase(ctx context.Context, log io.Writer) error {
	if st.cfg.ha {
		formation, err := hacluster.Start(ctx, hacluster.Config{Tuned: !st.cfg.haDefaultTiming, Database: "rocketrides", Output: log})
		if err != nil {
			return err
		}
		st.formation, st.databaseURL = formation, formation.URL()
		return nil
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		return err
	}
	st.cluster = cluster
	if err := cluster.CreateDatabase(ctx, "rocketrides"); err != nil {
		return err
	}
	st.databaseURL = cluster.URL("rocketrides")
	return nil
}

func (st *stack) createRiders(ctx context.Context) error {
	for i := range numRiders {
		r, err := st.sup.CreateRider(ctx, st.baseEnv, fmt.Sprintf("rider%d@rocketrides.example", i+1), "tok_visa")
		if err != nil {
			return err
		}
		st.riders = append(st.riders, *r)
	}
	declined, err := st.sup.CreateRider(ctx, st.baseEnv, "declined@rocketrides.example", "tok_chargeCustomerFail")
	if err != nil {
		return err
	}
	st.declined = *declined
	return nil
}

// waitReady waits for every API to answer /readyz.
func (st *stack) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for _, host := range st.apiHosts() {
		if err := supervisor.WaitOK(ctx, "http://"+host+"/readyz", time.Until(deadline), nil); err != nil {
			return fmt.Errorf("the API at %s was not ready: %w", host, err)
		}
	}
	return nil
}

// close stops everything that runs, the database last. The processes stop at once, not one
// after the other: a soak cut short may leave them waiting on a database that is down or frozen,
// each for seconds.
func (st *stack) close() error {
	var errs []error
	var stopping sync.WaitGroup
	for _, svc := range st.services() {
		stopping.Go(func() { _ = svc.stop() }) // already stopped by settle, unless the soak was cut short
	}
	stopping.Wait()
	if st.sup != nil {
		if err := st.sup.StopAll(); err != nil {
			errs = append(errs, err)
		}
	}
	if st.pool != nil {
		st.pool.Close()
	}
	if st.smtp != nil {
		_ = st.smtp.Close() // in memory; nothing to lose
	}
	if st.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.cluster.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("error stopping Postgres: %w", err))
		}
	}
	if st.formation != nil {
		if err := st.formation.Stop(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("error stopping the HA formation: %w", err))
		}
	}
	if st.binDir != "" {
		_ = os.RemoveAll(st.binDir) // a temporary directory; the OS cleans it up eventually
	}
	return errors.Join(errs...)
}

// labelledWriter writes each line written to it under label, like the processes' output.
type labelledWriter struct {
	out   *supervisor.PrefixWriter
	label string
}

func (w labelledWriter) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		w.out.Line(w.label, strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}
