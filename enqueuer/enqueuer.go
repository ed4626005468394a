package enqueuer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/maintenance"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/tracing"
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

func (e *Enqueuer) runOnce(ctx context.Context) (res *Result, setAside []*failure, err error) {
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

	var handOffs tracing.HandOffs
	defer func() { handOffs.End(err) }()
	ids, failures, err := e.insert(ctx, tx, stagedJobs, &handOffs)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range failures {
		handOffs.SetAside(f.stagedJob.ID, f.err)
		if err := models.StagedJobMarkFailed(ctx, tx, f.stagedJob.ID, f.err.Error()); err != nil {
			return nil, nil, err
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

// insert inserts the jobs of stagedJobs into River in tx. It returns the ids of the staged jobs
// River took, and the staged jobs that River will never take: those that do not decode, and those
// that River refuses for what they are (see jobsOwnFault). Any other error is returned, and the
// batch fails with it.
//
// Each job's hand-off starts in handOffs, a child of the request that staged the job, and the
// job's metadata carries the hand-off on to the worker. The batch stays one insert: each job
// carries its own ride's trace context, not the batch's.
func (e *Enqueuer) insert(ctx context.Context, tx pgx.Tx, stagedJobs []*models.StagedJob, handOffs *tracing.HandOffs) (ids []int64, failures []*failure, err error) {
	params := make([]river.InsertManyParams, 0, len(stagedJobs))
	decoded := make([]*models.StagedJob, 0, len(stagedJobs))
	for _, j := range stagedJobs {
		args, opts, err := e.decode(j.JobName, j.JobArgs)
		if err == nil && args == nil {
			err = errors.New("decoder returned no job args")
		}
		if err == nil {
			opts, err = withStagedAt(opts, j.CreatedAt)
		}
		if err == nil {
			opts.Metadata, err = handOffs.Start(ctx, j.ID, j.UserID, j.JobName, j.TraceContext, opts.Metadata)
		}
		if err != nil {
			failures = append(failures, &failure{stagedJob: j, err: fmt.Errorf("error decoding staged job: %w", err)})
			continue
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: opts})
		decoded = append(decoded, j)
		ids = append(ids, j.ID)
	}
	if len(params) == 0 {
		return nil, failures, nil // River refuses an empty batch.
	}

	insertErr, txErr := e.insertInSavepoint(ctx, tx, params)
	if txErr != nil {
		return nil, nil, txErr
	}
	if insertErr == nil {
		return ids, failures, nil
	}
	if !jobsOwnFault(tx, insertErr) && !isUniqueDuplicateInBatch(insertErr) {
		return nil, nil, insertErr // it may pass: the batch is tried again whole at the next pass
	}

	// River inserts a batch in one statement, which fails whole for a single job River refuses
	// (invalid insert options, say), and also for two jobs with the same unique key: River
	// inserts unique jobs with ON CONFLICT DO UPDATE, which Postgres will not apply to one row
	// twice in one statement. Left alone, such a batch would fail on every pass and block all the
	// jobs staged after it. One job per statement isolates the refused ones, and lets River skip
	// the second of two duplicates as it would across batches. A batch of one takes this path
	// too, and its job is refused once more: one statement, only ever for a job River refuses.
	e.logger.WarnContext(ctx, "Enqueuer: batch insert failed, inserting jobs one at a time",
		slog.Int("num_jobs", len(params)), slog.String("error", insertErr.Error()))
	ids = nil // from here, only the jobs River takes one at a time
	for i, j := range decoded {
		insertErr, txErr := e.insertInSavepoint(ctx, tx, params[i:i+1])
		if txErr != nil {
			return nil, nil, txErr
		}
		if insertErr == nil {
			ids = append(ids, j.ID)
		} else if jobsOwnFault(tx, insertErr) {
			failures = append(failures, &failure{stagedJob: j, err: insertErr})
		} else {
			return nil, nil, fmt.Errorf("error inserting staged job %d: %w", j.ID, insertErr)
		}
	}
	return ids, failures, nil
}

// insertInSavepoint inserts params into River in a savepoint of tx, so that a failed insert
// leaves tx usable for the next attempt. insertErr is the insert's error, for the caller to
// judge; txErr says that the savepoint itself failed, which leaves tx unusable.
func (e *Enqueuer) insertInSavepoint(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) (insertErr, txErr error) {
	savepoint, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating savepoint: %w", err)
	}
	if _, err := e.riverClient.InsertManyTx(ctx, savepoint, params); err != nil {
		insertErr = fmt.Errorf("error inserting jobs into River: %w", err)
		if rbErr := savepoint.Rollback(ctx); rbErr != nil {
			return nil, fmt.Errorf("%w, and then error rolling back to savepoint: %w", insertErr, rbErr)
		}
		return insertErr, nil
	}
	if err := savepoint.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error releasing savepoint: %w", err)
	}
	return nil, nil
}

// withStagedAt returns a copy of opts whose metadata also says when the job was staged (see
// jobargs.StagedAtKey), which the staged row, deleted in this transaction, can no longer tell.
func withStagedAt(opts *river.InsertOpts, stagedAt time.Time) (*river.InsertOpts, error) {
	out := *cmp.Or(opts, &river.InsertOpts{})
	metadata, err := jobargs.AddStagedAt(out.Metadata, stagedAt)
	out.Metadata = metadata
	return &out, err
}

// jobsOwnFault reports whether err, from inserting jobs into River in tx, is a refusal of the
// jobs themselves, one that recurs however often and by whomever they are inserted. Only then is
// a job set aside; any other error fails the batch, whose rows stay staged for the next pass.
// Wrongly setting a job aside leaves a valid receipt unsent until a person notices, while
// wrongly failing a batch costs a retry and an error line per pass, so an error is the job's
// fault only when it says so: River's own checks in Go of kind, arguments and insert options
// ("priority must be between 1 and 4": no *pgconn.PgError, connection or context error, and tx
// still usable), or Postgres refusing the job's values (class 22, data exception; class 23,
// integrity constraint violation such as a CHECK of river_job). Anything else may pass or blames
// something other than the job: a lost connection (08, or tx's closed by pgx after an I/O error),
// serialization failure or deadlock (40001, 40P01), a full disk (53), a lock or statement
// timeout (55P03, 57014), an administrator (57), ctx, a missing table (42P01), a trigger (P0001).
func jobsOwnFault(tx pgx.Tx, err error) bool {
	if tx.Conn().IsClosed() {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
	}
	// pgconn's timeouts wrap a context error or a net.Error, and so are among these.
	var netErr net.Error
	mayPass := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	return !mayPass
}

// isUniqueDuplicateInBatch reports whether err is Postgres refusing to let one statement's
// ON CONFLICT DO UPDATE touch a row twice (21000, cardinality_violation): a batch holding two
// unique jobs with the same key, which River takes one at a time.
func isUniqueDuplicateInBatch(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "21000"
}
