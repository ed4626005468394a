package enqueuer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
)

// insert inserts the jobs of stagedJobs into River in tx, and returns the staged jobs that River
// will never take: those that do not decode, and those that River refuses for what they are
// (see jobsOwnFault). Any other error is returned, and the batch fails with it.
func (e *Enqueuer) insert(ctx context.Context, tx pgx.Tx, stagedJobs []*models.StagedJob) ([]*failure, error) {
	var failures []*failure
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
		if err != nil {
			failures = append(failures, &failure{stagedJob: j, err: fmt.Errorf("error decoding staged job: %w", err)})
			continue
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: opts})
		decoded = append(decoded, j)
	}
	if len(params) == 0 {
		return failures, nil // River refuses an empty batch.
	}

	insertErr, txErr := e.insertInSavepoint(ctx, tx, params)
	if txErr != nil {
		return nil, txErr
	}
	if insertErr == nil {
		return failures, nil
	}
	ownFault := jobsOwnFault(tx, insertErr)
	if len(params) == 1 && ownFault {
		return append(failures, &failure{stagedJob: decoded[0], err: insertErr}), nil
	}
	if len(params) == 1 || !ownFault && !isUniqueDuplicateInBatch(insertErr) {
		return nil, insertErr // it may pass: the batch is tried again whole at the next pass
	}

	// River inserts a batch in one statement, which fails whole for a single job River refuses
	// (invalid insert options, say), and also for two jobs with the same unique key: River
	// inserts unique jobs with ON CONFLICT DO UPDATE, which Postgres will not apply to one row
	// twice in one statement. Left alone, such a batch would fail on every pass and block all the
	// jobs staged after it. One job per statement isolates the refused ones, and lets River skip
	// the second of two duplicates as it would across batches.
	e.logger.WarnContext(ctx, "Enqueuer: batch insert failed, inserting jobs one at a time",
		slog.Int("num_jobs", len(params)), slog.String("error", insertErr.Error()))
	for i := range params {
		insertErr, txErr := e.insertInSavepoint(ctx, tx, params[i:i+1])
		if txErr != nil {
			return nil, txErr
		}
		if insertErr == nil {
			continue
		}
		if !jobsOwnFault(tx, insertErr) {
			return nil, fmt.Errorf("error inserting staged job %d: %w", decoded[i].ID, insertErr)
		}
		failures = append(failures, &failure{stagedJob: decoded[i], err: insertErr})
	}
	return failures, nil
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
	var out river.InsertOpts
	if opts != nil {
		out = *opts
	}
	metadata, err := jobargs.AddStagedAt(out.Metadata, stagedAt)
	if err != nil {
		return nil, err
	}
	out.Metadata = metadata
	return &out, nil
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
		class := pgErr.Code[:min(2, len(pgErr.Code))]
		return class == "22" || class == "23"
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		pgconn.Timeout(err), pgconn.SafeToRetry(err), errors.Is(err, pgconn.ErrConnClosed),
		errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return false
	}
	return true
}

// isUniqueDuplicateInBatch reports whether err is Postgres refusing to let one statement's
// ON CONFLICT DO UPDATE touch a row twice (21000, cardinality_violation): a batch holding two
// unique jobs with the same key, which River takes one at a time.
func isUniqueDuplicateInBatch(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "21000"
}
