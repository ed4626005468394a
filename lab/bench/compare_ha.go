package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/devenv/hacluster"
	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
)

// The HA comparison (-compare-ha) prices the synchronous standby: the API and the twotx
// reference at -clients clients, first on a single durable node and then on a pg_auto_failover
// formation, a primary whose every commit waits for its standby to hold it, in the same run on
// the same machine, each on a database with the same history. Each side's API ÷ twotx says what
// the API costs over its SQL there; standby ÷ single says what the standby costs each.

// startDurableFormation starts a pg_auto_failover formation, a primary and its synchronous
// standby, as a comparison's database server. Its Postgres is durable as pg_autoctl sets it up,
// as production's is: fsync, synchronous_commit and full_page_writes on.
func startDurableFormation(ctx context.Context) (*benchCluster, error) {
	binDir, err := pgcluster.FindBinDir("")
	if err != nil {
		return nil, err
	}
	formation, err := hacluster.Start(ctx, hacluster.Config{BinDir: binDir, Tuned: true, Database: "bench"})
	if err != nil {
		return nil, err
	}
	c := &benchCluster{binDir: binDir, url: formation.URLFor, dataDir: formation.Dir(), stopped: formation.Stop}
	if c.admin, err = pgx.Connect(ctx, c.url("postgres")); err != nil {
		return nil, errors.Join(fmt.Errorf("error connecting to the formation: %w", err), c.stop(ctx))
	}
	return c, nil
}

// compareHA runs the HA comparison and prints its table to stdout.
func runCompareHA(ctx context.Context, opts *options, stdout, stderr io.Writer) int {
	runs, err := compareHA(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}
	printHA(stdout, opts, runs)
	for _, m := range runs {
		if m.api != nil && m.api.failed() {
			return exitFailed
		}
	}
	return exitOK
}

// Sides of the HA comparison.
const (
	sideSingle  = "single node"
	sideStandby = "sync standby"
)

// compareHA does the whole HA comparison, returning the runs in the order single twotx, single
// API, standby twotx, standby API. Everything it starts is stopped before it returns.
func compareHA(ctx context.Context, opts *options, progress io.Writer) (runs []*measurement, err error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", args...) }

	say("building cmd/api")
	workDir, removeWorkDir, err := buildInWorkDir(ctx, "api", "admin")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, removeWorkDir()) }()
	standIn, err := startStandIn(0)
	if err != nil {
		return nil, err
	}
	defer standIn.stop()
	scripts, err := writeScripts(workDir)
	if err != nil {
		return nil, err
	}

	for _, side := range []string{sideSingle, sideStandby} {
		say("starting the %s", side)
		var db *benchCluster
		if side == sideSingle {
			db, err = startDurableCluster(ctx, opts.clients, nil)
		} else {
			db, err = startDurableFormation(ctx)
		}
		if err != nil {
			return nil, err
		}
		sideRuns, err := runHASide(ctx, opts, db, standIn, scripts, workDir, say)
		err = errors.Join(err, db.stop(ctx))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", side, err)
		}
		for _, m := range sideRuns {
			m.side = side
		}
		runs = append(runs, sideRuns...)
	}
	return runs, nil
}

// runHASide prepares db and runs twotx and the API on it.
func runHASide(ctx context.Context, opts *options, db *benchCluster, standIn *standIn, scripts map[string]string,
	workDir string, say func(string, ...any)) ([]*measurement, error) {
	say("preparing the databases (-rides %d, -riders %d)", opts.rides, opts.riders)
	tokens, err := db.prepare(ctx, opts, standIn, false, workDir)
	if err != nil {
		return nil, err
	}
	api := newAPITarget(workDir, db, standIn, tokens, opts)
	var runs []*measurement
	for _, target := range []string{targetTwoTx, targetAPI} {
		say("running %s at %d clients for %s", target, opts.clients, opts.duration)
		var m *measurement
		if target == targetAPI {
			m, err = api.run(ctx, opts.clients, opts.duration)
		} else {
			m, err = db.runPgbench(ctx, scripts[target], databaseOf[target], maxTriesOf[target], opts.clients, opts.duration, workDir)
		}
		if err != nil {
			return nil, fmt.Errorf("error running %s: %w", target, err)
		}
		m.target, m.clients = target, opts.clients
		runs = append(runs, m)
	}
	return runs, nil
}

// printHA prints the HA comparison: rides per second and latency of each run, and the ratios.
func printHA(w io.Writer, opts *options, runs []*measurement) {
	by := map[string]map[string]*measurement{}
	for _, m := range runs {
		if by[m.side] == nil {
			by[m.side] = map[string]*measurement{}
		}
		by[m.side][m.target] = m
	}
	fmt.Fprintf(w, "\nThe synchronous standby's cost: %d clients for %s each, %d rides of history\n\n", opts.clients, opts.duration, opts.rides)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\t%s\tstandby ÷ single\n", sideSingle, sideStandby)
	for _, target := range []string{targetTwoTx, targetAPI} {
		single, standby := by[sideSingle][target], by[sideStandby][target]
		fmt.Fprintf(tw, "%s rides/s\t%.0f\t%.0f\t%.2f\n", target, single.ridesPerSecond, standby.ridesPerSecond,
			standby.ridesPerSecond/single.ridesPerSecond)
		fmt.Fprintf(tw, "%s p50 / p99 ms\t%.1f / %.1f\t%.1f / %.1f\t\n", target, ms(single.p50), ms(single.p99), ms(standby.p50), ms(standby.p99))
	}
	fmt.Fprintf(tw, "API ÷ twotx rides/s\t%.2f\t%.2f\t\n",
		by[sideSingle][targetAPI].ridesPerSecond/by[sideSingle][targetTwoTx].ridesPerSecond,
		by[sideStandby][targetAPI].ridesPerSecond/by[sideStandby][targetTwoTx].ridesPerSecond)
	_ = tw.Flush()
}
