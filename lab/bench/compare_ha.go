package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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

// runCompareHA runs the HA comparison and prints its table to stdout.
func runCompareHA(ctx context.Context, opts *options, stdout, stderr io.Writer) int {
	runs, err := compareHA(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}
	printHA(stdout, opts, runs)
	return sidesExitCode(runs)
}

// Sides of the HA comparison.
const (
	sideSingle  = "single node"
	sideStandby = "sync standby"
)

// compareHA does the whole HA comparison, returning the runs in the order single twotx, single
// API, standby twotx, standby API. Everything it starts is stopped before it returns.
func compareHA(ctx context.Context, opts *options, progress io.Writer) ([]*measurement, error) {
	return compareSides(ctx, opts, progress, []side{
		{name: sideSingle, what: sideSingle, start: func(ctx context.Context, opts *options, _ string) (*benchCluster, error) {
			return startDurableCluster(ctx, opts.clients, nil)
		}},
		{name: sideStandby, what: "primary and its " + sideStandby, start: func(ctx context.Context, _ *options, _ string) (*benchCluster, error) {
			return startDurableFormation(ctx)
		}},
	})
}

// printHA prints the HA comparison: rides per second and latency of each run, and the ratios.
func printHA(w io.Writer, opts *options, runs []*measurement) {
	fmt.Fprintf(w, "\nThe synchronous standby's cost: %d clients for %s each, %d rides of history\n\n", opts.clients, opts.duration, opts.rides)
	printSides(w, runs, sideSingle, sideStandby, "standby ÷ single")
}
