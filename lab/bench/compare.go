package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The comparison (-compare) puts the API next to two references that do a ride's database work
// with nothing around it, pgbench running SQL scripts on the same durable cluster in the same
// run, so that the ratios say what the API costs over the SQL it must run:
//
//   - article: the article's four SERIALIZABLE transactions per ride, on the schema as it was
//     before ids became random (migrations up to articleSchemaVersion);
//   - twotx: the same work in two SERIALIZABLE transactions, on today's schema;
//   - API: cmd/api itself, as a process, with the Stripe stand-in at zero latency, loaded by the
//     retrying client, one rider per client.
//
// Each runs at 1 client and at -clients clients, on a database of its own filled alike. With
// -baseline, a fourth target is the API as built from an earlier revision (see baseline.go).

// Names of the targets, as the table prints them.
const (
	targetArticle = "article pgbench"
	targetTwoTx   = "twotx pgbench"
	targetAPI     = "API"
)

// targets in the order they run and print; the baseline, if any, runs and prints last.
var targets = []string{targetArticle, targetTwoTx, targetAPI}

// runCompare runs the comparison, printing its progress to stderr and its report to stdout.
func runCompare(ctx context.Context, opts *options, stdout, stderr io.Writer) int {
	rep, err := compare(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}
	rep.print(stdout)
	if rep.failed() {
		return exitFailed
	}
	return exitOK
}

// measurement is one run of one target at one number of clients.
type measurement struct {
	target  string
	clients int
	side    string // with -compare-ha and -compare-citus: the side it ran on
	// With -compare: where its processes ran (-pin).
	placement placement

	rides          int64
	elapsed        time.Duration
	ridesPerSecond float64
	p50, p99       time.Duration

	// From pg_stat_database: the run's transactions on its database.
	commits, rollbacks int64

	// From pg_stat_statements, when loaded: distinct statements and their calls.
	statements, calls int64

	// pgbench only: how often it tries a ride (--max-tries), its retries of serialization
	// failures and deadlocks, the rides that needed any, and those that failed after every try.
	maxTries                           int
	retries, ridesRetried, ridesFailed int64
	// On a Citus cluster, pgbench only: the rides lost with the clients pgbench aborted after
	// Citus failed their COMMIT, each client replaced while the run lasted (pgbench_citus.go).
	aborted int64
	// replaced counts the replacements; replacementStartup is the median time from the start
	// of one that booked a ride by the deadline to the start of its first ride.
	replaced           int64
	replacementStartup time.Duration

	// With -compare: what each process used in the run, from just before the load to the end
	// of the run's sessions (the API's own until the end of the load), and the API's allocations.
	cpu *cpuUse

	// API only.
	api *result
	// connections is how many connections the API held on its database after the load.
	connections int64
}

// compare does the whole comparison. Everything it starts is stopped before it returns,
// whatever happens.
func compare(ctx context.Context, opts *options, progress io.Writer) (rep *report, err error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", args...) }

	var split *cpuSplit
	if opts.pin != pinOff {
		if split, err = newCPUSplit(); err != nil {
			return nil, err
		}
	}

	say("building cmd/api")
	workDir, removeWorkDir, err := buildInWorkDir(ctx, "api", "admin", "fakestripe")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, removeWorkDir()) }()
	baselineDir := filepath.Join(workDir, "baseline")
	if b := opts.baseline; b != nil {
		if err := os.Mkdir(baselineDir, 0o755); err != nil {
			return nil, fmt.Errorf("error creating a directory for the baseline: %w", err)
		}
		if err := b.build(ctx, baselineDir, say); err != nil {
			return nil, err
		}
	}

	say("starting a durable Postgres cluster")
	var serverLog io.Writer
	if opts.serverLog != "" {
		f, err := os.Create(opts.serverLog)
		if err != nil {
			return nil, fmt.Errorf("error creating -server-log: %w", err)
		}
		defer f.Close()
		serverLog = f
	}
	cluster, err := startDurableCluster(ctx, opts.clients, serverLog)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cluster.stop(ctx)) }()

	// The stand-in runs as a process of its own, whose CPU time is told from the bench's.
	standIn, err := startStandInProcess(ctx, workDir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, standIn.stop()) }()
	if cluster.cpu, err = newCPUMeter(cluster.dataDir, standIn.pid()); err != nil {
		return nil, err
	}
	if split != nil {
		// Everything goes back on every CPU, this process above all, which in tests runs others.
		defer func() {
			err = errors.Join(err, split.place(placementShared, cluster.cpu.postmaster, standIn.pid()))
		}()
	}

	say("preparing the databases (-rides %d, -riders %d)", opts.rides, opts.riders)
	tokens, err := cluster.prepare(ctx, opts, standIn, true, workDir)
	if err != nil {
		return nil, err
	}
	rep = &report{opts: opts, db: cluster, fileSystem: cluster.fileSystem(), targets: targets}
	if rep.settings, err = cluster.settings(ctx); err != nil {
		return nil, err
	}
	if rep.history, err = cluster.history(ctx); err != nil {
		return nil, err
	}
	scripts, err := writeScripts(workDir)
	if err != nil {
		return nil, err
	}
	apis := map[string]*apiTarget{targetAPI: newAPITarget(workDir, cluster, standIn, tokens, opts)}
	if opts.baseline != nil {
		// Right after the API, so that both see the machine as alike as a run can; or right
		// before it, with -baseline-first: the first of the two runs on a database whose
		// caches and index pages the second finds warmer.
		rep.targets = append(slices.Clone(targets), opts.baseline.target())
		if opts.baselineFirst {
			rep.targets = append(slices.Clone(targets[:len(targets)-1]), opts.baseline.target(), targetAPI)
		}
		apis[opts.baseline.target()] = newAPITarget(baselineDir, cluster, standIn, tokens, opts)
	}

	rep.placements, rep.where = opts.pin.placements(), map[placement]string{}
	for _, p := range rep.placements {
		if split != nil {
			rep.where[p] = split.describe(p)
			say("placing %s", rep.where[p])
			if err := split.place(p, cluster.cpu.postmaster, standIn.pid()); err != nil {
				return nil, err
			}
		}
		if err := runTargets(ctx, rep, p, cluster, apis, scripts, workDir, say); err != nil {
			return nil, err
		}
		if err := runRounds(ctx, rep, p, apis, say); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// runTargets runs every target at each number of clients, in placement p; apis are the
// targets that are a build of the API, by name.
func runTargets(ctx context.Context, rep *report, p placement, cluster *benchCluster, apis map[string]*apiTarget, scripts map[string]string,
	workDir string, say func(string, ...any)) error {
	for _, clients := range rep.clientCounts() {
		duration := rep.opts.duration
		if clients == 1 {
			duration = rep.opts.soloDuration
		}
		for _, target := range rep.targets {
			say("running %s at %d %s for %s", target, clients, plural(clients, "client"), duration)
			var m *measurement
			var err error
			if api, ok := apis[target]; ok {
				m, err = api.run(ctx, clients, duration)
			} else {
				m, err = cluster.runPgbench(ctx, scripts[target], databaseOf[target], maxTriesOf[target], clients, duration, workDir)
			}
			if err != nil {
				return fmt.Errorf("error running %s at %d clients (%s): %w", target, clients, p, err)
			}
			m.target, m.clients, m.placement = target, clients, p
			rep.runs = append(rep.runs, m)
		}
	}
	return nil
}
