package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// riverConnsMax is how many pool connections River itself may hold besides those of running
// jobs: its listener keeps one for good, and fetching jobs, completing them, electing a leader
// and the leader's maintenance take one each, at most, at a time.
const riverConnsMax = 5

// poolMaxConns is the database pool a worker running concurrency jobs at once needs. Each
// receipt job holds a connection from before it sends to the commit that records the send (see
// workers.SendRideReceiptWorker), so that recording never waits for one; pgxpool's default of
// max(4, number of CPUs) would hold the jobs up, or River, on most machines.
func poolMaxConns(concurrency int) int32 {
	return int32(concurrency + riverConnsMax)
}

// withMaxConns returns a pool like pool, which it closes, but of at least maxConns connections.
// bootstrap.Open sizes its pool for the processes that run one thing at a time; the worker takes
// its pool and asks for more. A larger pool_max_conns in DATABASE_URL is kept; a smaller one is
// not honoured, as it would starve the jobs: WORKER_CONCURRENCY is the knob for fewer
// connections.
func withMaxConns(ctx context.Context, pool *pgxpool.Pool, maxConns int32) (*pgxpool.Pool, error) {
	config := pool.Config() // a copy
	if config.MaxConns >= maxConns {
		return pool, nil
	}
	config.MaxConns = maxConns
	sized, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("error creating database pool of %d connections: %w", maxConns, err)
	}
	pool.Close()
	return sized, nil
}
