package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// A two-sided comparison (-compare-ha, -compare-citus) runs the twotx reference and the API at
// -clients clients on one database server and then on another, in the same run on the same
// machine, each on databases with the same history, and prints the two sides next to each other.

// side is one side of a two-sided comparison: its name, as the table prints it, what it is, as
// the progress says, and how to start its database server. start may keep files in workDir,
// which outlives the server.
type side struct {
	name, what string
	start      func(ctx context.Context, opts *options, workDir string) (*benchCluster, error)
}

// compareSides does a whole two-sided comparison, returning the runs side by side, each side's
// twotx and then its API. Everything it starts is stopped before it returns.
func compareSides(ctx context.Context, opts *options, progress io.Writer, sides []side) (runs []*measurement, err error) {
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

	for _, s := range sides {
		say("starting the %s", s.what)
		db, err := s.start(ctx, opts, workDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		sideRuns, err := runSide(ctx, opts, db, standIn, scripts, workDir, say)
		if err != nil && db.serverErrors != nil {
			err = fmt.Errorf("%w%s", err, db.serverErrors())
		}
		err = errors.Join(err, db.stop(ctx))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		for _, m := range sideRuns {
			m.side = s.name
		}
		runs = append(runs, sideRuns...)
	}
	return runs, nil
}

// runSide prepares db and runs twotx and the API on it.
func runSide(ctx context.Context, opts *options, db *benchCluster, standIn *standIn, scripts map[string]string,
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

// sidesExitCode is a two-sided comparison's exit status once its table is printed: a call to
// the API that ended badly makes its figures meaningless.
func sidesExitCode(runs []*measurement) int {
	for _, m := range runs {
		if m.api != nil && m.api.failed() {
			return exitFailed
		}
	}
	return exitOK
}

// printSides prints the table of a two-sided comparison: rides per second and latency of each
// run on the sides first and second, the ratio of second to first under ratioHeader, and each
// side's API ÷ twotx.
func printSides(w io.Writer, runs []*measurement, first, second, ratioHeader string) {
	by := map[string]map[string]*measurement{}
	for _, m := range runs {
		if by[m.side] == nil {
			by[m.side] = map[string]*measurement{}
		}
		by[m.side][m.target] = m
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\t%s\t%s\n", first, second, ratioHeader)
	for _, target := range []string{targetTwoTx, targetAPI} {
		a, b := by[first][target], by[second][target]
		fmt.Fprintf(tw, "%s rides/s\t%.0f\t%.0f\t%.2f\n", target, a.ridesPerSecond, b.ridesPerSecond,
			b.ridesPerSecond/a.ridesPerSecond)
		fmt.Fprintf(tw, "%s p50 / p99 ms\t%.1f / %.1f\t%.1f / %.1f\t\n", target, ms(a.p50), ms(a.p99), ms(b.p50), ms(b.p99))
	}
	fmt.Fprintf(tw, "API ÷ twotx rides/s\t%.2f\t%.2f\t\n",
		by[first][targetAPI].ridesPerSecond/by[first][targetTwoTx].ridesPerSecond,
		by[second][targetAPI].ridesPerSecond/by[second][targetTwoTx].ridesPerSecond)
	_ = tw.Flush()
}
