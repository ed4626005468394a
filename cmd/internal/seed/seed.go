// Package seed fills a migrated database with history: riders, and rides that finished over
// the last two days, each row exactly as the API, the enqueuer and the receipt worker leave it
// after a successful request. Benchmarks need it to measure the system on tables and indexes
// the size production has, not on an empty database that fits in a few pages; demos need it to
// show something.
//
// It writes with COPY rather than through models: booking 300,000 rides through the phases, at
// the 300 or so a second they manage, would take over a quarter of an hour, and bulk loading is
// no part of the lesson models teaches. The SQL here is therefore the only place that must
// follow the schema by hand; its tests hold it to what the phases write and models read back.
package seed

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options say how much history to make.
type Options struct {
	// Rides is the number of finished rides, each with its idempotency key and audit record.
	Rides int

	// Riders is the number of new users the rides are spread over. When there are at least as
	// many rides as riders, every rider gets at least one. It must be at least 1 when Rides is
	// positive.
	Riders int
}

// Validate reports options that cannot be seeded, so that a command can refuse them before it
// connects to anything.
func (o Options) Validate() error {
	switch {
	case o.Rides < 0:
		return fmt.Errorf("rides must be 0 or more, not %d", o.Rides)
	case o.Riders < 0:
		return fmt.Errorf("riders must be 0 or more, not %d", o.Riders)
	case o.Rides > 0 && o.Riders < 1:
		return fmt.Errorf("%d rides need at least 1 rider", o.Rides)
	}
	return nil
}

// Result is what Seed made.
type Result struct {
	Riders int
	Rides  int

	// SequentialIDs is true on the article's schema (migrations up to 00005), whose keys, rides
	// and audit records take their ids from sequences, and false on the current one, whose ids
	// are random (models.NewID).
	SequentialIDs bool
}

// historyWindow is how far back the rides go: two days, so that some keys are older than the
// 24 hours Stripe remembers an idempotency key for, and none is old enough for the reaper
// (REAP_AFTER, 72 h) to delete as soon as it runs.
const historyWindow = 48 * time.Hour

// Seed adds opts.Riders riders and opts.Rides finished rides to the database in one
// transaction, and then analyzes the tables it wrote, so that the planner knows their new size
// before the first query that a benchmark times.
func Seed(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}

	// The rides end a moment before now, so that no receipt is recorded in the future.
	end := time.Now().Add(-receiptLag)
	start := end.Add(-historyWindow)

	var ids *idSource
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Copying millions of rows takes far longer than the statement timeout that bounds the
		// service's own statements (bootstrap.StatementTimeoutDefault).
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return err
		}
		var err error
		if ids, err = newIDSource(ctx, tx); err != nil {
			return err
		}
		// Riders exist before the first of their rides.
		userIDs, err := insertRiders(ctx, tx, opts.Riders, start)
		if err != nil {
			return err
		}
		if err := insertRides(ctx, tx, opts.Rides, userIDs, ids, start, end); err != nil {
			return err
		}
		return ids.advanceSequences(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("error seeding: %w", err)
	}

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "ANALYZE users, idempotency_keys, rides, audit_records")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error analyzing seeded tables: %w", err)
	}
	return &Result{Riders: opts.Riders, Rides: opts.Rides, SequentialIDs: ids.sequential}, nil
}
