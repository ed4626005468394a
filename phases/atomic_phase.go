package phases

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// PhaseAction is what a phase returns: what to record on the key in the same transaction, so
// that the phase's work and its outcome commit together or not at all. It is NoOp,
// SetRecoveryPoint or Response (the article's NoOp, RecoveryPoint and Response; here
// models.RecoveryPoint names a point), or ForeignMutationNext.
type PhaseAction interface {
	apply(progress *models.IdempotencyKeyProgress) error
}

// NoOp records nothing on the key, and so ends the atomic phase where it is.
type NoOp struct{}

func (NoOp) apply(*models.IdempotencyKeyProgress) error { return nil }

// ForeignMutationNext ends the atomic phase where it is: a foreign state mutation comes next,
// outside any transaction. The key records, as the phase commits, that the mutation is about to
// be attempted (charge_attempted_at), which the age of its Stripe idempotency key is measured
// from.
type ForeignMutationNext struct{}

func (ForeignMutationNext) apply(progress *models.IdempotencyKeyProgress) error {
	progress.ForeignMutationAttempted = true
	return nil
}

// SetRecoveryPoint moves the key to a new recovery point; the next phase starts from there, in
// this request or in any retry of it.
type SetRecoveryPoint struct {
	Name models.RecoveryPoint
}

func (r SetRecoveryPoint) apply(progress *models.IdempotencyKeyProgress) error {
	progress.RecoveryPoint = r.Name
	return nil
}

// HTTP status codes of the responses this package stores. They are plain numbers because the
// state machine knows nothing of HTTP; the API serves whatever was stored.
const (
	statusOK                  = 200
	statusCreated             = 201
	statusNotFound            = 404
	statusConflict            = 409
	statusPaymentRequired     = 402
	statusInternalServerError = 500
)

// methodPost is the method of every request this package runs, stored on its key.
const methodPost = "POST"

// Response finishes the request: it stores the status and body that this and every later
// retry receive, moves the key to finished and unlocks it. Success ends with a Response, and so
// does an error that no retry could change, such as a declined card.
type Response struct {
	Status int
	Body   any
}

func (r Response) apply(progress *models.IdempotencyKeyProgress) error {
	if p, ok := r.Body.(*problem.Problem); ok && p.RequestID != "" {
		// A request id names one HTTP request, and a stored body answers every retry of the
		// key; the API gives each answer the id of its own request (api.writeStoredProblem).
		withoutID := *p
		withoutID.RequestID = ""
		r.Body = &withoutID
	}
	body, err := json.Marshal(r.Body)
	if err != nil {
		return fmt.Errorf("error encoding response: %w", err)
	}
	progress.RecoveryPoint = models.RecoveryPointFinished
	progress.ResponseCode = &r.Status
	progress.ResponseBody = body
	return nil
}

// step is the work of one phase, which leaves the recovery point it is named under in steps. It
// runs in the atomic phase's transaction, reading through tx and queueing its writes on
// tx.Writes. It may run more than once (see inSerializableTx), so it must keep no state outside
// the transaction that a second run would trip over.
type step func(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error)

// steps are the phases an atomic phase covers, each under the recovery point it leaves (see
// CreateRide). A key may stand at any of them when the atomic phase starts.
type steps map[models.RecoveryPoint]step

// passOn is the step at a point that the other atomic phase leaves: it ends this one, with
// nothing to do.
func passOn(context.Context, *phaseTx, *run) (PhaseAction, error) { return NoOp{}, nil }

// atomicPhase runs one atomic phase in one SERIALIZABLE transaction. It runs the step of the
// key's recovery point, then the step of each point the last step's PhaseAction moves the key to.
// It stops when the request finishes or an action leaves the key where it was (NoOp,
// ForeignMutationNext).
// Phases with nothing foreign between them share one commit: each commit is an fsync the rider
// waits for. A request's first atomic phase also finds or creates its key and locks it.
//
// The key is written once, as the transaction commits, with the last point reached: no one sees
// a point passed inside the transaction. It is written first in the batch, so every transaction
// locks the key's row before any other, and requests on one key never deadlock. The write is
// fenced: once another request took the key over, it fails with ErrLockLost and the whole phase
// rolls back. A phase gives up after Config.PhaseTimeout, with nothing committed.
func (e *Executor) atomicPhase(ctx context.Context, r *run, steps steps) error {
	if e.hooks.phaseTimeout != nil {
		e.hooks.phaseTimeout(e.config.PhaseTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, e.config.PhaseTimeout)
	defer cancel()
	ctx, span := tracing.StartAtomicPhase(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	var (
		next    run // the run as this try leaves it; r takes it only once it committed
		newKey  bool
		written *models.IdempotencyKey

		// from is the recovery point the phases started from, as the metrics and the trace name
		// the atomic phase; empty if none ran (a replay, a key in use or reused).
		from  models.RecoveryPoint
		began = time.Now()
	)
	attempts, err := e.inSerializableTx(ctx, func(ctx context.Context, tx *phaseTx) error {
		next, newKey, written, from = *r, false, &models.IdempotencyKey{}, ""
		if next.key == nil {
			var err error
			if newKey, err = e.upsertIdempotencyKey(ctx, tx, &next); err != nil || next.replayed {
				return err
			}
		}
		from = next.key.RecoveryPoint

		progress := models.IdempotencyKeyProgress{RecoveryPoint: from, TraceParent: tracing.TraceParent(ctx)}
		for progress.RecoveryPoint != models.RecoveryPointFinished {
			at := progress.RecoveryPoint
			step, ok := steps[at]
			if !ok {
				return fmt.Errorf("bug: no phase leaves %s in this atomic phase", at)
			}
			action, err := step(ctx, tx, &next)
			if err != nil {
				return err
			}
			if e.hooks.inPhase != nil {
				if err := e.hooks.inPhase(ctx, tx, at); err != nil {
					return err
				}
			}
			if err := action.apply(&progress); err != nil {
				return err
			}
			if progress.RecoveryPoint == at {
				break // the atomic phase ends here: what follows is foreign, or another's
			}
		}

		tx.writeFirst(func(batch *pgx.Batch) {
			if newKey {
				models.IdempotencyKeyInsert(batch, next.key, progress, e.config.LockLease, written)
			} else {
				models.IdempotencyKeyRecordProgress(batch, next.key, next.lockGeneration, e.config.LockLease, progress, written)
			}
		})
		return nil
	})
	tracing.EndAtomicPhase(span, string(from), string(written.RecoveryPoint), attempts, err)
	if from != "" {
		e.config.Metrics.PhaseDuration.WithLabelValues(string(from)).Observe(time.Since(began).Seconds())
	}
	if attempts > 1 {
		// A conflict while finding the key counts against the first phase.
		phase := cmp.Or(from, models.RecoveryPointStarted)
		e.config.Metrics.SerializationRetries.WithLabelValues(string(phase)).Add(float64(attempts - 1))
	}
	if err != nil {
		if newKey && errors.Is(err, ErrCommitOutcomeUnknown) {
			// The new key may have been inserted, locked for this run. Unlocking that lock (its
			// random id, the first generation) matches nothing if the insert never landed, so the
			// run unlocks it and a retry need not wait out the lease. A lock taken on an existing
			// key is left to run out instead: its generation is only one more than the last, and
			// a request that took the key meanwhile may hold that same one.
			r.key, r.lockGeneration = next.key, models.LockGenerationFirst
		}
		// Otherwise nothing of this phase committed, the lock it may have taken included.
		return err
	}
	if !next.replayed {
		next.key, next.lockGeneration = written, written.LockGeneration
	}
	*r = next
	return nil
}

// Backoff between tries of an atomic phase that hit a serialization failure: full jitter over
// an exponentially growing ceiling, so that the conflicting transactions spread out instead of
// colliding again in lockstep.
const (
	retryBackoffBase = 2 * time.Millisecond
	retryBackoffMax  = 200 * time.Millisecond
)

// inSerializableTx runs fn in a SERIALIZABLE transaction and commits it. When Postgres aborts
// the transaction with a serialization failure (40001) or a deadlock (40P01), it runs fn again
// in a new one, for as long as Config.ConflictRetryBudget allows. Those errors mean only that a
// concurrent transaction got in the way, and a retry usually succeeds at once. The budget is
// time, not a number of tries, because what the rider feels is time: a try takes a millisecond
// on an idle database and far longer on a loaded one. It returns how many transactions it ran.
func (e *Executor) inSerializableTx(ctx context.Context, fn func(ctx context.Context, tx *phaseTx) error) (int, error) {
	start := e.now()
	for attempt := 1; ; attempt++ {
		tx := &phaseTx{pool: e.pool}
		err := fn(ctx, tx)
		if err == nil {
			err = tx.commit(ctx)
		}
		if err != nil {
			tx.rollback(context.WithoutCancel(ctx))
		}
		if err == nil || !isRetryable(err) {
			return attempt, err
		}
		if spent := e.now().Sub(start); spent >= e.config.ConflictRetryBudget {
			return attempt, fmt.Errorf("%w after %d attempts in %s: %w", ErrConflict, attempt,
				spent.Round(time.Millisecond), err)
		}

		ceiling := min(retryBackoffBase<<attempt, retryBackoffMax)
		select {
		case <-ctx.Done():
			return attempt, ctx.Err()
		case <-time.After(rand.N(ceiling)):
		}
	}
}

// isRetryable reports whether err is a serialization failure or a deadlock, or a first request
// for a key losing to a concurrent one: a unique violation of the rider's key. Under
// SERIALIZABLE that loser usually gets a 40001, but only when its lookup of the key read the
// unique index; on a plan that reads another index (the primary key, which also leads with the
// rider) it gets the 23505, which means the same: a retry finds the winner's key.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "40001" || pgErr.Code == "40P01" || (pgErr.Code == "23505" &&
		(pgErr.ConstraintName == models.IdempotencyKeyUniqueConstraint ||
			// Citus passes on a worker's error without its constraint name.
			strings.HasPrefix(pgErr.Detail, "Key (user_id, idempotency_key)=")))
}

// keepLease renews the lease on r's key every third of Config.LockLease until the returned
// function stops it; runPhases starts it once the first atomic phase has committed the lock. A
// renewal that fails for want of a database is tried again at the next tick; one that
// finds the key taken over stops renewing. Neither stops the request: if another request took
// its key over, the request's next atomic phase finds a newer lock generation and commits
// nothing (ErrLockLost), and that is where it ends.
func (e *Executor) keepLease(ctx context.Context, r *run) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mu := r.mu // read here, before any atomic phase rewrites the run (with the same mutex)
	var renewing sync.WaitGroup
	renewing.Go(func() {
		ticker := time.NewTicker(e.config.LockLease / 3)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if !e.renewLease(ctx, r, mu) {
				return
			}
		}
	})
	return func() {
		cancel()
		renewing.Wait()
	}
}

// renewLease renews the lease on r's key once, and reports whether to go on renewing. mu is r's.
func (e *Executor) renewLease(ctx context.Context, r *run, mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	if r.key.RecoveryPoint == models.RecoveryPointFinished {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, e.config.LockLease/3)
	defer cancel()
	held, err := models.IdempotencyKeyRenewLease(ctx, e.pool, r.key.UserID, r.key.ID, r.lockGeneration, e.config.LockLease)
	if err != nil {
		e.logger.WarnContext(ctx, "Phases: failed to renew the lease of an idempotency key",
			slog.Int64("idempotency_key_id", r.key.ID), slog.String("error", err.Error()))
		return true
	}
	if !held {
		e.logger.WarnContext(ctx, "Phases: lost the lease of an idempotency key to another request",
			slog.Int64("idempotency_key_id", r.key.ID), slog.Int64("lock_generation", r.lockGeneration))
	}
	return held
}
