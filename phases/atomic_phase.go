package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/models"
)

// PhaseAction is what the work of an atomic phase returns: what to record on the key in the
// same transaction, so that the phase's work and its outcome commit together or not at all.
// It is one of NoOp, RecoveryPoint or Response.
type PhaseAction interface {
	apply(ctx context.Context, tx pgx.Tx, key *models.IdempotencyKey) (*models.IdempotencyKey, error)
}

// NoOp records nothing on the key: the request carries on from where it is.
type NoOp struct{}

func (NoOp) apply(_ context.Context, _ pgx.Tx, key *models.IdempotencyKey) (*models.IdempotencyKey, error) {
	return key, nil
}

// RecoveryPoint moves the key to a new recovery point; the next phase starts from there, in
// this request or in any retry of it.
type RecoveryPoint struct {
	Name models.RecoveryPoint
}

func (r RecoveryPoint) apply(ctx context.Context, tx pgx.Tx, key *models.IdempotencyKey) (*models.IdempotencyKey, error) {
	return models.IdempotencyKeySetRecoveryPoint(ctx, tx, key.ID, r.Name)
}

// Response finishes the request: it stores the status and body that this and every later
// retry receive, moves the key to finished and unlocks it. Success ends with a Response, and so
// does an error that no retry could change, such as a declined card.
type Response struct {
	Status int
	Body   any
}

func (r Response) apply(ctx context.Context, tx pgx.Tx, key *models.IdempotencyKey) (*models.IdempotencyKey, error) {
	body, err := json.Marshal(r.Body)
	if err != nil {
		return nil, fmt.Errorf("error encoding response: %w", err)
	}
	return models.IdempotencyKeyFinish(ctx, tx, key.ID, r.Status, body)
}

// phaseFunc is the work of one atomic phase. It gets the key as freshly read in the phase's
// transaction. It may run more than once (see inSerializableTx), so it must keep no state
// outside the transaction that a second run would trip over.
type phaseFunc func(ctx context.Context, tx pgx.Tx, key *models.IdempotencyKey) (PhaseAction, error)

// atomicPhase runs fn in one SERIALIZABLE transaction together with the PhaseAction it returns,
// and on commit updates key in place.
//
// Fencing: the phase first re-reads the key and checks that its locked_at is still the value
// this request wrote when it took the lock. If another request took the key over, the phase
// commits nothing and returns ErrLockLost.
func (e *Executor) atomicPhase(ctx context.Context, key *models.IdempotencyKey, fn phaseFunc) error {
	var updated *models.IdempotencyKey
	err := e.inSerializableTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		current, err := models.IdempotencyKeyGetByIDForUpdate(ctx, tx, key.ID)
		if err != nil {
			if errors.Is(err, models.ErrNotFound) {
				return ErrLockLost // reaped under our feet: certainly not ours any more
			}
			return err
		}
		if !holdsLock(current, key) {
			return ErrLockLost
		}

		action, err := fn(ctx, tx, current)
		if err != nil {
			return err
		}
		if e.hooks.inPhase != nil {
			if err := e.hooks.inPhase(ctx, tx, current.RecoveryPoint); err != nil {
				return err
			}
		}
		updated, err = action.apply(ctx, tx, current)
		return err
	})
	if err != nil {
		return err
	}
	// The lock token is what this request took, not what the row says after a Response
	// released it: unlocking later must still compare against the original.
	lockedAt := key.LockedAt
	*key = *updated
	if key.RecoveryPoint != models.RecoveryPointFinished {
		key.LockedAt = lockedAt
	}
	return nil
}

// holdsLock reports whether current, read inside a phase, is still locked by the request that
// holds mine (the key as that request last saw it).
func holdsLock(current, mine *models.IdempotencyKey) bool {
	return current.RecoveryPoint != models.RecoveryPointFinished &&
		current.LockedAt != nil && mine.LockedAt != nil &&
		current.LockedAt.Equal(*mine.LockedAt)
}

// Backoff between tries of a phase that hit a serialization failure: full jitter over an
// exponentially growing ceiling, so that the conflicting transactions spread out instead of
// colliding again in lockstep.
const (
	retryBackoffBase = 5 * time.Millisecond
	retryBackoffMax  = 500 * time.Millisecond
)

// inSerializableTx runs fn in a SERIALIZABLE transaction, and runs it again in a new one when
// Postgres aborts it with a serialization failure (40001) or a deadlock (40P01), up to
// Config.MaxPhaseAttempts tries. Those two errors mean only that a concurrent transaction got
// in the way; the same work usually succeeds at once when retried.
func (e *Executor) inSerializableTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
			return fn(ctx, tx)
		})
		if err == nil || !isRetryable(err) {
			return err
		}
		if attempt >= e.config.MaxPhaseAttempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrConflict, attempt, err)
		}

		ceiling := min(retryBackoffBase<<attempt, retryBackoffMax)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rand.N(ceiling)):
		}
	}
}

// isRetryable reports whether err is a serialization failure or a deadlock.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
