package main

import (
	"context"
	"fmt"
	"time"
)

// idleCost is what an idle stack costs the database over a window: the statements of each
// process, from pg_stat_statements, which counts them by role, and the transactions committed
// on the database as a whole, from pg_stat_database.
type idleCost struct {
	window  time.Duration
	commits int64

	// processes is empty when pg_stat_statements is not installed.
	processes []processIdleCost
}

// processIdleCost is one process's statements over the window.
type processIdleCost struct {
	process string
	// statements counts every statement, transactionControl those of them that are BEGIN,
	// COMMIT or ROLLBACK.
	statements, transactionControl int64
}

// measureIdle leaves the stack alone for idleSettle and then counts what it does for window.
func measureIdle(ctx context.Context, cluster *benchCluster, window time.Duration) (*idleCost, error) {
	if err := sleep(ctx, idleSettle); err != nil {
		return nil, err
	}
	if cluster.statStatements {
		if _, err := cluster.admin.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			return nil, fmt.Errorf("error resetting pg_stat_statements: %w", err)
		}
	}
	before, err := cluster.counters(ctx, dbReceipts)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, window); err != nil {
		return nil, err
	}
	after, err := cluster.counters(ctx, dbReceipts)
	if err != nil {
		return nil, err
	}
	cost := &idleCost{window: window, commits: after.commits - before.commits}
	if !cluster.statStatements {
		return cost, nil
	}
	for _, process := range stackProcesses {
		pc := processIdleCost{process: process}
		err := cluster.admin.QueryRow(ctx, `
			SELECT coalesce(sum(calls), 0),
			       coalesce(sum(calls) FILTER (WHERE query ~* '^\s*(begin|commit|rollback|start transaction)\M'), 0)
			FROM pg_stat_statements s
			JOIN pg_database d ON d.oid = s.dbid
			JOIN pg_roles r ON r.oid = s.userid
			WHERE d.datname = $1 AND r.rolname = $2`, dbReceipts, processRole(process)).
			Scan(&pc.statements, &pc.transactionControl)
		if err != nil {
			return nil, fmt.Errorf("error reading pg_stat_statements: %w", err)
		}
		cost.processes = append(cost.processes, pc)
	}
	return cost, nil
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
