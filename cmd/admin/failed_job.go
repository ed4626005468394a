package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
)

// Failed work lives in two places, and its ids are told apart by a prefix, as list-failed-jobs
// prints them and retry-job takes them: river:ID is a job of River's (river_job) that River
// discarded after its last attempt, staged:ID a staged job (staged_jobs) that the enqueuer set
// aside because River would not take it. A bare number would be ambiguous: both tables count
// from 1.
const (
	sourceRiver  = "river"
	sourceStaged = "staged"
)

// failedJobID is a parsed river:ID or staged:ID.
type failedJobID struct {
	source string
	id     int64
}

func (f failedJobID) String() string { return f.source + ":" + strconv.FormatInt(f.id, 10) }

func parseFailedJobID(s string) (failedJobID, error) {
	source, num, ok := strings.Cut(s, ":")
	id, err := strconv.ParseInt(num, 10, 64)
	if !ok || (source != sourceRiver && source != sourceStaged) || err != nil || id < 1 {
		return failedJobID{}, fmt.Errorf("%q is not a job id: give river:ID or staged:ID, as list-failed-jobs prints them", s)
	}
	return failedJobID{source: source, id: id}, nil
}

// openRiver opens the database for the commands on failed jobs, checks River's schema, and
// returns an insert-only River client: one with no queues works no jobs and runs none of River's
// maintenance, so it cannot race the worker.
func openRiver(ctx context.Context) (*pgxpool.Pool, *river.Client[pgx.Tx], error) {
	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	_, pool, err := bootstrap.Open(ctx, cfg, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	if err := bootstrap.CheckRiverSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("error creating River client: %w", err)
	}
	return pool, client, nil
}
