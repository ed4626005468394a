package enqueuer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/maintenance"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// NotifyChannel is the channel the API notifies once it committed staged jobs (see
// models.StagedJobsNotify).
const NotifyChannel = models.StagedJobsChannel

// DecodeFunc turns a staged job into the River job to insert for it. The enqueuer knows no job
// kinds; the package of the jobs' args does, and supplies this (jobargs.DecodeStagedJob).
// opts may be nil. An error sets the staged job aside (see RunOnce) rather than failing the batch:
// a staged job that does not decode now never will.
type DecodeFunc func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error)

// Config tunes an Enqueuer. The zero value of each field means its default.
type Config struct {
	// BatchSize is the most staged jobs one RunOnce hands over, all in one transaction. Default
	// BatchSizeDefault.
	BatchSize int

	// PollInterval is how long a started Enqueuer sleeps when no notification wakes it, the
	// fallback for a notification missed while its listening connection was down. Default
	// PollIntervalDefault.
	PollInterval time.Duration

	// JobNames are the staged job names that the DecodeFunc knows (jobargs.StagedJobNames()).
	// Required. The enqueuer takes only staged jobs of these names and leaves any other row
	// staged and untouched: during a rolling deploy a newer API may stage a job that this
	// release has no worker for, and that job must wait for the newer enqueuer rather than be
	// set aside as broken.
	JobNames []string

	// Metrics counts the jobs each pass enqueues and sets aside. Default: a set that no
	// registry holds.
	Metrics *metrics.Enqueuer
}

// Defaults of Config.
const (
	// BatchSizeDefault is large enough that a backlog drains in few round trips, small enough
	// that a batch's transaction and its row locks last well under a second.
	BatchSizeDefault = 1000

	// PollIntervalDefault bounds how late a job whose notification was missed reaches River,
	// at one query a second.
	PollIntervalDefault = time.Second
)

func (c Config) withDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	if c.Metrics == nil {
		c.Metrics = metrics.NewEnqueuer(nil)
	}
	return c
}

// Result is what one RunOnce did, and what `enqueuer -once` prints.
type Result struct {
	// Enqueued is how many staged jobs River took. It includes jobs that River recognised as
	// duplicates of a unique job it already had: those were handed over too, and River kept one.
	Enqueued int `json:"enqueued"`

	// Failed is how many staged jobs River will never take (they do not decode, or River
	// refuses them), and were set aside: marked failed in staged_jobs for a person to look at.
	Failed int `json:"failed"`
}

// Enqueuer moves staged jobs into River. It is safe to run several, in one process or many.
type Enqueuer struct {
	pool        *pgxpool.Pool
	riverClient *river.Client[pgx.Tx]
	decode      DecodeFunc
	logger      *slog.Logger
	config      Config

	wake chan struct{} // a staged job arrived; buffered, so that a wake-up is never lost
	loop *maintenance.Loop

	// stagedJobs says whether staged_jobs is distributed by rider (Citus).
	stagedJobs models.DistributedTable

	reportMu         sync.Mutex
	nextStrandedScan time.Time // when reportStranded next counts; zero: at the next pass

	mu           sync.Mutex
	cancel       context.CancelFunc // ends the listener and the loop
	listenerDone chan struct{}
}

// New returns an Enqueuer that inserts through riverClient, which should be insert-only (no
// Workers): a client with Workers refuses kinds it has no worker for, and the enqueuer would set
// the jobs of those kinds aside.
func New(pool *pgxpool.Pool, riverClient *river.Client[pgx.Tx], decode DecodeFunc, logger *slog.Logger, config Config) (*Enqueuer, error) {
	if decode == nil || len(config.JobNames) == 0 {
		return nil, errors.New("an enqueuer needs a DecodeFunc and the job names it knows")
	}
	config = config.withDefaults()
	e := &Enqueuer{
		pool:        pool,
		riverClient: riverClient,
		decode:      decode,
		logger:      logger,
		config:      config,
		wake:        make(chan struct{}, 1),
		stagedJobs:  models.DistributedTable{Table: "staged_jobs"},
	}
	e.loop = &maintenance.Loop{
		Name: "Enqueuer",
		RunOnce: func(ctx context.Context) (bool, error) {
			res, err := e.RunOnce(ctx)
			if err != nil {
				return false, err
			}
			return res.Enqueued+res.Failed == config.BatchSize, nil
		},
		Interval: config.PollInterval,
		Wake:     e.wake,
		Logger:   logger,
	}
	return e, nil
}

// Start listens on NotifyChannel and drains staged jobs in the background until ctx ends or Stop
// is called. It returns once it is listening, so that any job staged after Start returns wakes
// the enqueuer; it fails if it cannot listen at all. An Enqueuer starts once.
func (e *Enqueuer) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listenerDone != nil {
		return errors.New("enqueuer already started")
	}

	conn, err := e.listen(ctx)
	if err != nil {
		return err
	}
	ctx, e.cancel = context.WithCancel(ctx)
	e.listenerDone = make(chan struct{})
	go e.runListener(ctx, conn)
	e.loop.Start(ctx)
	return nil
}

// Stop ends the background work, waits for the batch in progress to commit or roll back, and
// closes the listening connection.
func (e *Enqueuer) Stop() {
	e.mu.Lock()
	cancel, done := e.cancel, e.listenerDone
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	e.loop.Stop()
	<-done
}

// RunOnce hands over one batch of staged jobs, oldest first, in one transaction: it locks up to
// BatchSize staged rows of the known job names that no other enqueuer holds, inserts their jobs
// into River, deletes exactly those rows, and commits. Should anything fail, the transaction
// rolls back and every row stays staged for the next pass.
//
// A staged job that River will never take would stay first in line and, given enough of them,
// block every job behind it, so it is set aside in the same transaction (see failure and
// jobsOwnFault).
func (e *Enqueuer) RunOnce(ctx context.Context) (*Result, error) {
	res, setAside, err := e.runOnce(ctx)
	if err != nil {
		return nil, fmt.Errorf("error draining staged jobs: %w", err)
	}
	// Logged and counted once committed, so that a rolled-back batch reports nothing it did
	// not do.
	e.config.Metrics.EnqueuedJobs.Add(float64(res.Enqueued))
	e.config.Metrics.SetAsideJobs.Add(float64(res.Failed))
	for _, f := range setAside {
		e.logger.ErrorContext(ctx, "Enqueuer: set aside a staged job River will not take; it stays in staged_jobs marked failed",
			slog.Int64("staged_job_id", f.stagedJob.ID), slog.String("job_name", f.stagedJob.JobName),
			slog.String("error", f.err.Error()))
	}
	if res.Enqueued > 0 || res.Failed > 0 {
		e.logger.InfoContext(ctx, "Enqueuer: enqueued jobs",
			slog.Int("num_enqueued", res.Enqueued), slog.Int("num_failed", res.Failed))
	}
	e.reportStranded(ctx)
	return res, nil
}

// lock locks the next batch of staged jobs in tx: in one statement on a single Postgres, rider
// by rider where staged_jobs is distributed by rider (Citus), which is found out once.
func (e *Enqueuer) lock(ctx context.Context, tx pgx.Tx) ([]*models.StagedJob, error) {
	distributed, err := e.stagedJobs.Is(ctx, tx)
	if err != nil {
		return nil, err
	}
	var jobs []*models.StagedJob
	if distributed {
		jobs, err = models.StagedJobLockByRider(ctx, tx, e.config.JobNames, e.config.BatchSize)
	} else {
		jobs, err = models.StagedJobLockBatch(ctx, tx, e.config.JobNames, e.config.BatchSize)
	}
	if err != nil {
		e.stagedJobs.Forget()
	}
	return jobs, err
}

func (e *Enqueuer) runOnce(ctx context.Context) (*Result, []*failure, error) {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("error beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // A no-op once committed.

	stagedJobs, err := e.lock(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	if len(stagedJobs) == 0 {
		return &Result{}, nil, nil
	}

	failures, err := e.insert(ctx, tx, stagedJobs)
	if err != nil {
		return nil, nil, err
	}
	setAside := make(map[int64]bool, len(failures))
	for _, f := range failures {
		if err := models.StagedJobMarkFailed(ctx, tx, f.stagedJob.ID, f.err.Error()); err != nil {
			return nil, nil, err
		}
		setAside[f.stagedJob.ID] = true
	}

	ids := make([]int64, 0, len(stagedJobs)-len(failures))
	for _, j := range stagedJobs {
		if !setAside[j.ID] {
			ids = append(ids, j.ID)
		}
	}
	// By id alone, on purpose: where staged_jobs is distributed (Citus), this delete spans every
	// shard, which Citus always commits in two phases, so that River's jobs (on the coordinator)
	// and the deletes (on a worker) commit together. A delete routed to the rider's one shard
	// would commit in one phase, the worker first, and a coordinator dying between the two
	// commits would lose the jobs. TestCitus checks the two phases in the workers' logs.
	deleted, err := models.StagedJobDeleteByIDs(ctx, tx, ids)
	if err != nil {
		return nil, nil, err
	}
	// Rows locked FOR UPDATE cannot vanish under us; if they did, committing could double a job.
	if deleted != int64(len(ids)) {
		return nil, nil, fmt.Errorf("bug: deleted %d staged jobs of the %d enqueued", deleted, len(ids))
	}

	if err := tx.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("error committing: %w", err)
	}
	return &Result{Enqueued: len(ids), Failed: len(failures)}, failures, nil
}
