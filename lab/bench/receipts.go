package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/migrations"
)

// The receipt measurement (-receipts; see doc.go for what it prints) runs every process but the
// API on its defaults. The API runs with RATE_LIMITS=off: one rider booking back to back is over
// the per-rider limit, which is no part of a receipt's way. Each stage's timestamp is stored or
// seen on this one machine, so no clock skew enters the figures.

// Defaults of the receipt measurement's flags.
const (
	receiptBookingsDefault = 40
	receiptIdleDefault     = 60 * time.Second
)

// receiptWaitTimeout bounds the wait for every receipt to reach the mail server. A receipt that
// misses its notifications is fetched at the worker's next poll, within a second or two; one
// still missing after half a minute is lost, and the run fails.
const receiptWaitTimeout = 30 * time.Second

// idleSettle is how long the stack is left alone before the idle window opens: River flushes
// the last jobs' completions, and Postgres's backends, which report their transactions to
// pg_stat_database up to 10 s after they went idle, have reported the bookings'.
const idleSettle = 15 * time.Second

// stackProcesses are the processes the measurement runs, in the Procfile's order. Each connects
// as a role of its own (see roleURL), so that pg_stat_statements, which counts by role, tells
// their statements apart.
var stackProcesses = []string{"api", "worker", "enqueuer", "completer", "reaper"}

// dbReceipts is the database of the receipt measurement.
const dbReceipts = "receipts"

// runReceipts runs the receipt measurement, printing its progress to stderr and its report to
// stdout.
func runReceipts(ctx context.Context, opts *options, stdout, stderr io.Writer) int {
	rep, err := measureReceipts(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}
	rep.print(stdout)
	return exitOK
}

// measureReceipts does the whole measurement. Everything it starts is stopped before it
// returns, whatever happens.
func measureReceipts(ctx context.Context, opts *options, progress io.Writer) (rep *receiptsReport, err error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", args...) }

	say("building %v", stackProcesses)
	workDir, removeWorkDir, err := buildInWorkDir(ctx, append([]string{"admin"}, stackProcesses...)...)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, removeWorkDir()) }()

	say("starting a durable Postgres cluster, the Stripe stand-in and an SMTP server")
	// Room for every process's pool at its largest; the processes are what is measured, not
	// the cluster's limits.
	cluster, err := startDurableCluster(ctx, 4*connectionsHeadroom, nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cluster.stop(ctx)) }()
	standIn, err := startStandIn(opts.stripeLatency)
	if err != nil {
		return nil, err
	}
	defer standIn.stop()
	mail, err := smtptest.Start(smtptest.Options{})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, mail.Close()) }()

	if err := cluster.createDatabase(ctx, dbReceipts, ""); err != nil {
		return nil, err
	}
	databaseURL := cluster.url(dbReceipts)
	if err := migrations.Up(ctx, databaseURL); err != nil {
		return nil, err
	}
	if err := createProcessRoles(ctx, cluster.admin); err != nil {
		return nil, err
	}
	tokens, err := createAPIRiders(ctx, workDir, databaseURL, 1, standIn)
	if err != nil {
		return nil, err
	}

	say("starting %v", stackProcesses)
	procs, err := startStack(ctx, workDir, databaseURL, mail.URL(), standIn)
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			err = errors.Join(err, procs[i].stop())
		}
	}()
	if err != nil {
		return nil, err
	}
	rider := &client.Client{BaseURL: procs[0].url, Token: tokens[0]}

	// One booking first, not measured: it proves the way works end to end and warms up what a
	// running service has warm (connections, the worker's producer, the enqueuer's listener).
	say("booking a first ride and waiting for its receipt")
	if _, err := book(ctx, rider); err != nil {
		return nil, err
	}
	if err := waitForMessages(ctx, mail, 1); err != nil {
		return nil, err
	}

	say("booking %d rides one after another", opts.bookings)
	bookings := make([]*booking, opts.bookings)
	for i := range bookings {
		if bookings[i], err = book(ctx, rider); err != nil {
			return nil, fmt.Errorf("error booking ride %d: %w", i+1, err)
		}
	}
	if err := waitForMessages(ctx, mail, 1+opts.bookings); err != nil {
		return nil, err
	}
	rep = &receiptsReport{bookings: opts.bookings}
	if rep.receipts, err = receiptTimelines(ctx, databaseURL, bookings, mail.Messages()); err != nil {
		return nil, err
	}

	if opts.idle > 0 {
		say("leaving the stack idle for %s, then counting its statements for %s", idleSettle, opts.idle)
		if rep.idle, err = measureIdle(ctx, cluster, opts.idle); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// roleURL is databaseURL with the user name of process's role.
func roleURL(databaseURL, process string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("error parsing the database URL: %w", err)
	}
	u.User = url.User(processRole(process))
	return u.String(), nil
}

// processRole is the database role process connects as.
func processRole(process string) string { return "rr_" + process }

// createProcessRoles creates each process's role. They are superusers: the cluster is the
// measurement's own, and the processes' privileges are not what it measures.
func createProcessRoles(ctx context.Context, admin *pgx.Conn) error {
	for _, process := range stackProcesses {
		if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{processRole(process)}.Sanitize()+" LOGIN SUPERUSER"); err != nil {
			return fmt.Errorf("error creating the role of %s: %w", process, err)
		}
	}
	return nil
}

// startStack starts stackProcesses, the API first, and returns those it started, the API at
// index 0, once the API is ready.
func startStack(ctx context.Context, workDir, databaseURL, smtpURL string, standIn *standIn) ([]*process, error) {
	var procs []*process
	for _, name := range stackProcesses {
		dbURL, err := roleURL(databaseURL, name)
		if err != nil {
			return procs, err
		}
		// What each process needs to reach the others, as the Procfile's .env gives it.
		env := []string{"DATABASE_URL=" + dbURL, "SMTP_URL=" + smtpURL, "STRIPE_API_KEY=" + standInKey, "STRIPE_API_URL=" + standIn.url, "API_TOKEN_SECRET=" + tokenSecret}
		binary, logPath := filepath.Join(workDir, name), filepath.Join(workDir, name+".log")
		var p *process
		if name == "api" {
			p, err = startAPI(ctx, binary, logPath, append(env, "RATE_LIMITS=off"))
		} else {
			p, err = startProcess("the "+name, binary, logPath, env)
		}
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// booking is one ride booked, and when its 201 came in.
type booking struct {
	rideID   string
	sent     time.Time // when the request went out
	answered time.Time // when the 201 was in
}

// book books one ride.
func book(ctx context.Context, rider *client.Client) (*booking, error) {
	params := client.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.8044, TargetLon: -122.2712}
	sent := time.Now()
	res, err := rider.CreateRide(ctx, params)
	if err != nil {
		return nil, err
	}
	return &booking{rideID: res.Ride.ID, sent: sent, answered: time.Now()}, nil
}

// waitForMessages waits until the mail server has accepted n messages.
func waitForMessages(ctx context.Context, mail *smtptest.Server, n int) error {
	deadline := time.Now().Add(receiptWaitTimeout)
	for {
		got := len(mail.Messages())
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the mail server has %d of %d receipts after %s", got, n, receiptWaitTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
