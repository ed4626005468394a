package models

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// IdempotencyKeyUniqueConstraint is the unique index on (user_id, idempotency_key), from
// migration 00001: one key per rider and client key.
const IdempotencyKeyUniqueConstraint = "idempotency_keys_user_id_idempotency_key"

// IdempotencyKey is the record of one client request: what was asked, how far the server got,
// which request holds it now, and, once finished, the response to replay.
type IdempotencyKey struct {
	ID                   int64
	CreatedAt            time.Time
	IdempotencyKey       string
	LastRunAt            time.Time
	LockedAt             *time.Time // when the current holder took the lock
	LockedUntil          *time.Time // when its lease runs out; the key is locked until then
	LockGeneration       int64      // the fencing token: one more at every new lock
	RequestMethod        string
	RequestParams        json.RawMessage
	RequestPath          string
	OriginIP             netip.Addr
	ResponseCode         *int
	ResponseBody         json.RawMessage
	RecoveryPoint        RecoveryPoint
	StripeIdempotencyKey string
	// ForeignMutationAttemptedAt is when the key's Stripe call (a charge or a refund) was first
	// about to be sent. Its column is still named charge_attempted_at: a renamed column would
	// break the old release that runs beside the new one during a deploy.
	ForeignMutationAttemptedAt *time.Time
	LastError                  *string
	UserID                     int64

	// TraceParent is the W3C traceparent of the request that last wrote the key, when it was
	// traced: a retry's trace links to it.
	TraceParent *string
}

const idempotencyKeyColumns = `id, created_at, idempotency_key, last_run_at, locked_at, locked_until, lock_generation,
	request_method, request_params, request_path, origin_ip, response_code, response_body,
	recovery_point, stripe_idempotency_key, charge_attempted_at, last_error, user_id, trace_parent`

// writtenColumns are what a write of a key returns: the columns whose values the database
// decides (the times, the lock generation) and the stored response in jsonb's own layout, which
// every replay gets. The writer knows the rest, and reading all of a key back after each write
// cost the API a fair share of its CPU and allocations a ride (docs/performance.md).
const writtenColumns = `created_at, last_run_at, locked_at, locked_until, lock_generation, charge_attempted_at, response_body`

// scanWritten makes written the key as written: key, the key as its writer knows it, at
// progress, with a row of writtenColumns read in.
func scanWritten(row pgx.Row, key *IdempotencyKey, progress IdempotencyKeyProgress, written *IdempotencyKey) error {
	*written = *key
	written.RecoveryPoint, written.ResponseCode = progress.RecoveryPoint, progress.ResponseCode
	written.TraceParent = cmp.Or(progress.TraceParent, key.TraceParent)
	return row.Scan(&written.CreatedAt, &written.LastRunAt, &written.LockedAt, &written.LockedUntil,
		&written.LockGeneration, &written.ForeignMutationAttemptedAt, &written.ResponseBody)
}

// scanIdempotencyKey reads a row of idempotencyKeyColumns, a line of them to a line.
func scanIdempotencyKey(row interface{ Scan(...any) error }) (*IdempotencyKey, error) {
	var k IdempotencyKey
	if err := row.Scan(&k.ID, &k.CreatedAt, &k.IdempotencyKey, &k.LastRunAt, &k.LockedAt, &k.LockedUntil, &k.LockGeneration,
		&k.RequestMethod, &k.RequestParams, &k.RequestPath, &k.OriginIP, &k.ResponseCode, &k.ResponseBody,
		&k.RecoveryPoint, &k.StripeIdempotencyKey, &k.ForeignMutationAttemptedAt, &k.LastError, &k.UserID,
		&k.TraceParent); err != nil {
		return nil, err
	}
	return &k, nil
}

// IdempotencyKeyGetForUpdate finds a rider's key by the client's key and locks its row until
// the transaction ends. It returns ErrNotFound if there is none.
func IdempotencyKeyGetForUpdate(ctx context.Context, db DBTX, userID int64, key string) (*IdempotencyKey, error) {
	k, err := scanIdempotencyKey(db.QueryRow(ctx, `
		SELECT `+idempotencyKeyColumns+` FROM idempotency_keys
		WHERE user_id = $1 AND idempotency_key = $2
		FOR UPDATE`, userID, key))
	if err != nil {
		return nil, fmt.Errorf("error getting idempotency key: %w", notFound(err))
	}
	return k, nil
}

// IdempotencyKeyGetByIDForUpdate finds a rider's key by its id and locks its row until the
// transaction ends. It returns ErrNotFound if there is none.
func IdempotencyKeyGetByIDForUpdate(ctx context.Context, db DBTX, userID, id int64) (*IdempotencyKey, error) {
	k, err := scanIdempotencyKey(db.QueryRow(ctx, `
		SELECT `+idempotencyKeyColumns+`
		FROM idempotency_keys
		WHERE user_id = $1 AND id = $2
		FOR UPDATE`, userID, id))
	if err != nil {
		return nil, fmt.Errorf("error getting idempotency key %d: %w", id, notFound(err))
	}
	return k, nil
}

// IdempotencyKeyOutcome returns how far a rider's key got and, once it finished, the status of
// its stored response. It returns ErrNotFound if there is no such key.
func IdempotencyKeyOutcome(ctx context.Context, db DBTX, userID, id int64) (RecoveryPoint, *int, error) {
	var point RecoveryPoint
	var code *int
	err := db.QueryRow(ctx, `SELECT recovery_point, response_code FROM idempotency_keys WHERE user_id = $1 AND id = $2`,
		userID, id).Scan(&point, &code)
	if err != nil {
		return "", nil, fmt.Errorf("error getting the outcome of idempotency key %d: %w", id, notFound(err))
	}
	return point, code, nil
}

// IdempotencyKeyProgress is what an atomic phase writes on its key when it commits: the
// recovery point it reached and, at RecoveryPointFinished, the response to replay. The write
// that finishes a key also unlocks it.
type IdempotencyKeyProgress struct {
	RecoveryPoint RecoveryPoint
	ResponseCode  *int
	ResponseBody  json.RawMessage

	// ForeignMutationAttempted says the key's Stripe call (a booking's charge, a cancel's
	// refund) is about to be sent. The write then stamps charge_attempted_at with the
	// database's now(), unless an earlier attempt stamped it already.
	ForeignMutationAttempted bool

	// TraceParent is the W3C traceparent of the writing request, nil when it is not traced;
	// a nil one leaves the key's as it was (queueTraceParent).
	TraceParent *string
}

// LockGenerationFirst is the lock generation of a new key's first lock.
const LockGenerationFirst int64 = 1

// IdempotencyKeyInsert queues on batch the insert of key, a new key made in memory, at the
// progress its first atomic phase made: key gives what a key keeps for life (its request, its
// rider, its Stripe key), progress the rest. Unless that phase finished the request, the key is
// locked by the inserting request, for lease, with LockGenerationFirst. written receives the
// key as inserted once the batch has run.
func IdempotencyKeyInsert(batch *pgx.Batch, key *IdempotencyKey, progress IdempotencyKeyProgress, lease time.Duration, written *IdempotencyKey) {
	unfinished := progress.RecoveryPoint != RecoveryPointFinished
	batch.Queue(`
		INSERT INTO idempotency_keys (id, idempotency_key,
			locked_at, locked_until, lock_generation,
			request_method, request_params, request_path, origin_ip,
			recovery_point, response_code, response_body,
			stripe_idempotency_key, charge_attempted_at, user_id)
		VALUES ($1, $2,
			now() + make_interval(secs => $3), now() + make_interval(secs => $4), $5,
			$6, $7, $8, $9,
			$10, $11, $12,
			$13, now() + make_interval(secs => $14), $15)
		RETURNING `+writtenColumns,
		key.ID, key.IdempotencyKey,
		secondsIf(unfinished, 0), secondsIf(unfinished, lease.Seconds()), LockGenerationFirst,
		key.RequestMethod, key.RequestParams, key.RequestPath, key.OriginIP,
		progress.RecoveryPoint, progress.ResponseCode, progress.ResponseBody,
		key.StripeIdempotencyKey, secondsIf(progress.ForeignMutationAttempted, 0), key.UserID,
	).QueryRow(func(row pgx.Row) error {
		if err := scanWritten(row, key, progress, written); err != nil {
			return fmt.Errorf("error inserting idempotency key: %w", err)
		}
		return nil
	})
	queueTraceParent(batch, key, progress)
}

// queueTraceParent queues on batch, after a write of key, the write of the writer's traceparent,
// when it is traced. A statement of its own, so that an untraced request sends the statements it
// sent before tracing: one parameter more pushed the batch past pgx's write buffer, a copy more
// on every ride.
func queueTraceParent(batch *pgx.Batch, key *IdempotencyKey, progress IdempotencyKeyProgress) {
	if progress.TraceParent != nil {
		batch.Queue(`UPDATE idempotency_keys SET trace_parent = $3 WHERE user_id = $1 AND id = $2`,
			key.UserID, key.ID, *progress.TraceParent).Exec(func(pgconn.CommandTag) error { return nil })
	}
}

// secondsIf returns secs when on holds, and nil otherwise. The writes here set a time as
// now() + make_interval(secs => secondsIf(...)), which is NULL when the time must stay unset.
// The plain way, now() inside CASE or COALESCE, is refused by Citus. least() keeps an earlier
// time against a NULL.
func secondsIf(on bool, secs float64) *float64 {
	if !on {
		return nil
	}
	return &secs
}

// IdempotencyKeyRecordProgress queues on batch the write of an atomic phase's progress on an
// existing key. The write renews the key's lease for lease, or unlocks the key if it finished.
// It is fenced: it writes only while the key is still locked with generation, the caller's
// lock generation. Otherwise another request took the key over, or the reaper deleted it, and
// the batch fails with ErrLockLost. key is the key as last written; written receives it as
// written now.
func IdempotencyKeyRecordProgress(batch *pgx.Batch, key *IdempotencyKey, generation int64, lease time.Duration, progress IdempotencyKeyProgress, written *IdempotencyKey) {
	batch.Queue(`
		UPDATE idempotency_keys
		SET recovery_point = $4,
			locked_at = CASE WHEN $4 = 'finished' THEN NULL ELSE locked_at END,
			locked_until = now() + make_interval(secs => $5),
			response_code = $6, response_body = $7,
			charge_attempted_at = least(charge_attempted_at, now() + make_interval(secs => $8))
		WHERE user_id = $1 AND id = $2 AND lock_generation = $3 AND locked_until IS NOT NULL
		RETURNING `+writtenColumns,
		key.UserID, key.ID, generation, progress.RecoveryPoint,
		secondsIf(progress.RecoveryPoint != RecoveryPointFinished, lease.Seconds()),
		progress.ResponseCode, progress.ResponseBody, secondsIf(progress.ForeignMutationAttempted, 0),
	).QueryRow(func(row pgx.Row) error {
		err := scanWritten(row, key, progress, written)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLockLost
		}
		if err != nil {
			return fmt.Errorf("error recording progress of idempotency key %d: %w", key.ID, err)
		}
		return nil
	})
	queueTraceParent(batch, key, progress)
}

// IdempotencyKeyLock locks an unfinished key for a new run, if nobody holds it: it was never
// locked, or was unlocked, or its holder's lease ran out. The lock is a lease of lease, and the
// lock generation goes up by one: the new generation is the caller's fencing token. It returns
// ErrNotFound when someone else holds the key.
func IdempotencyKeyLock(ctx context.Context, db DBTX, userID, id int64, lease time.Duration) (*IdempotencyKey, error) {
	k, err := scanIdempotencyKey(db.QueryRow(ctx, `
		UPDATE idempotency_keys
		SET locked_at = now(), locked_until = now() + make_interval(secs => $3),
			lock_generation = lock_generation + 1, last_run_at = now()
		WHERE user_id = $1 AND id = $2 AND recovery_point <> 'finished'
			AND (locked_until IS NULL OR locked_until <= now())
		RETURNING `+idempotencyKeyColumns, userID, id, lease.Seconds()))
	if err != nil {
		return nil, fmt.Errorf("error locking idempotency key %d: %w", id, notFound(err))
	}
	return k, nil
}

// IdempotencyKeyRenewLease extends the lease of a key to lease from now, if the caller's
// request (lock generation generation) still holds it. It reports false when it does not.
func IdempotencyKeyRenewLease(ctx context.Context, db DBTX, userID, id, generation int64, lease time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, `
		UPDATE idempotency_keys SET locked_until = now() + make_interval(secs => $4)
		WHERE user_id = $1 AND id = $2 AND lock_generation = $3 AND locked_until IS NOT NULL`,
		userID, id, generation, lease.Seconds())
	if err != nil {
		return false, fmt.Errorf("error renewing lease of idempotency key %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// IdempotencyKeyUnlock unlocks a key after a failed run, so that a retry need not wait for the
// lease to run out, and records why the run failed. It unlocks only the caller's lock
// generation: a request whose key was taken over must not unlock its successor's.
func IdempotencyKeyUnlock(ctx context.Context, db DBTX, userID, id, generation int64, lastError string) (bool, error) {
	tag, err := db.Exec(ctx, `
		UPDATE idempotency_keys SET locked_at = NULL, locked_until = NULL, last_error = $4
		WHERE user_id = $1 AND id = $2 AND lock_generation = $3 AND locked_until IS NOT NULL`,
		userID, id, generation, SanitizeErrorText(lastError))
	if err != nil {
		return false, fmt.Errorf("error unlocking idempotency key %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// IdempotencyKeyForeignMutationOlderThan reports whether the key's Stripe call was first
// attempted more than maxAge ago, by the database's clock. A call never attempted is not.
func IdempotencyKeyForeignMutationOlderThan(ctx context.Context, db DBTX, userID, id int64, maxAge time.Duration) (bool, error) {
	var older bool
	err := db.QueryRow(ctx, `
		SELECT charge_attempted_at IS NOT NULL AND charge_attempted_at <= now() - make_interval(secs => $3)
		FROM idempotency_keys
		WHERE user_id = $1 AND id = $2`, userID, id, maxAge.Seconds()).Scan(&older)
	if err != nil {
		return false, fmt.Errorf("error checking charge attempt of idempotency key %d: %w", id, notFound(err))
	}
	return older, nil
}

// StripeKeySecretGet returns this database's secret for deriving Stripe idempotency keys.
// Migration 00008_stripe_key_secret.sql draws it once, at random, so every backup, replica and
// restore of the database carries it along.
func StripeKeySecretGet(ctx context.Context, db DBTX) ([]byte, error) {
	var secret []byte
	if err := db.QueryRow(ctx, `SELECT secret FROM stripe_key_secret`).Scan(&secret); err != nil {
		return nil, fmt.Errorf("error reading the Stripe key secret: %w", notFound(err))
	}
	return secret, nil
}
