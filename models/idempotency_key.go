package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecoveryPoint names the last atomic phase a request committed. A retried request resumes
// from it instead of starting over; see package phases for the graph they form.
type RecoveryPoint string

// The recovery points of the requests, in the order the phases reach them. Every request starts
// at started and ends at finished. A ride request (POST /rides) passes ride_created and
// charge_created; a cancel (POST /rides/{id}/cancel) passes refund_created.
const (
	RecoveryPointStarted       RecoveryPoint = "started"
	RecoveryPointRideCreated   RecoveryPoint = "ride_created"
	RecoveryPointChargeCreated RecoveryPoint = "charge_created"
	RecoveryPointRefundCreated RecoveryPoint = "refund_created"
	RecoveryPointFinished      RecoveryPoint = "finished"
)

// IdempotencyKeyUniqueConstraint is the unique index that allows one key per rider and client
// key (migration 00001).
const IdempotencyKeyUniqueConstraint = "idempotency_keys_user_id_idempotency_key"

// IdempotencyKeyRetention is how long a key is kept before the reaper deletes it (the reaper's
// and the completer's default): long enough that a bug shipped on a Friday can be fixed on
// Monday and the completer still finds the requests it broke.
const IdempotencyKeyRetention = 72 * time.Hour

// IdempotencyKey is the bookkeeping of one client request: what was asked, how far the server
// got, who is working on it right now, and, once finished, the response to replay.
type IdempotencyKey struct {
	ID                   int64
	CreatedAt            time.Time
	IdempotencyKey       string
	LastRunAt            time.Time
	LockedAt             *time.Time // when the current holder took the lock
	LockedUntil          *time.Time // when its lease runs out; the key is locked until then
	LockGeneration       int64      // the fencing token: up by one at every acquisition
	RequestMethod        string
	RequestParams        json.RawMessage
	RequestPath          string
	OriginIP             netip.Addr
	ResponseCode         *int
	ResponseBody         json.RawMessage
	RecoveryPoint        RecoveryPoint
	StripeIdempotencyKey string
	// ForeignMutationAttemptedAt is when the key's Stripe call (a charge, a refund) was first
	// about to be sent. Its column keeps the name charge_attempted_at from the days when a
	// charge was the only foreign state mutation: renaming a column would break the release
	// still running beside a new one during a deploy.
	ForeignMutationAttemptedAt *time.Time
	LastError                  *string
	UserID                     int64
}

const idempotencyKeyColumns = `id, created_at, idempotency_key, last_run_at, locked_at,
	locked_until, lock_generation,
	request_method, request_params, request_path, origin_ip, response_code, response_body,
	recovery_point, stripe_idempotency_key, charge_attempted_at, last_error, user_id`

func scanIdempotencyKey(row interface{ Scan(...any) error }) (*IdempotencyKey, error) {
	var k IdempotencyKey
	err := row.Scan(&k.ID, &k.CreatedAt, &k.IdempotencyKey, &k.LastRunAt, &k.LockedAt,
		&k.LockedUntil, &k.LockGeneration,
		&k.RequestMethod, &k.RequestParams, &k.RequestPath, &k.OriginIP, &k.ResponseCode,
		&k.ResponseBody, &k.RecoveryPoint, &k.StripeIdempotencyKey, &k.ForeignMutationAttemptedAt,
		&k.LastError, &k.UserID)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// IdempotencyKeyGetForUpdate finds a user's key and locks its row for the rest of the
// transaction, or returns ErrNotFound.
func IdempotencyKeyGetForUpdate(ctx context.Context, db DBTX, userID int64, key string) (*IdempotencyKey, error) {
	k, err := scanIdempotencyKey(db.QueryRow(ctx, `
		SELECT `+idempotencyKeyColumns+`
		FROM idempotency_keys
		WHERE user_id = $1 AND idempotency_key = $2
		FOR UPDATE`, userID, key))
	if err != nil {
		return nil, fmt.Errorf("error getting idempotency key: %w", notFound(err))
	}
	return k, nil
}

// IdempotencyKeyGetByIDForUpdate reloads a rider's key by id and locks its row.
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

// IdempotencyKeyOutcome returns the recovery point of a rider's key id and, once finished, the
// status of its stored response; ErrNotFound if there is no such key.
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

// IdempotencyKeyProgress is what an atomic phase records on its key as it commits: the recovery
// point it reached and, at RecoveryPointFinished, the response to replay. A finished key is
// unlocked in the same write.
type IdempotencyKeyProgress struct {
	RecoveryPoint RecoveryPoint
	ResponseCode  *int
	ResponseBody  json.RawMessage

	// ForeignMutationAttempted records that the key's Stripe call (a ride's charge, a cancel's
	// refund) is about to be sent: charge_attempted_at becomes the database's now(), unless an
	// earlier attempt set it already.
	ForeignMutationAttempted bool
}

// IdempotencyKeyInsertParams are the columns of a new key.
type IdempotencyKeyInsertParams struct {
	ID                   int64
	IdempotencyKey       string
	RequestMethod        string
	RequestParams        json.RawMessage
	RequestPath          string
	OriginIP             netip.Addr
	StripeIdempotencyKey string
	UserID               int64
	Progress             IdempotencyKeyProgress
}

// LockGenerationFirst is the lock generation of a new key's first lock.
const LockGenerationFirst int64 = 1

// IdempotencyKeyInsert queues on batch the insert of a new key, at the progress its first
// atomic phase made and, unless that finished it, leased to the inserting request for lease, as
// LockGenerationFirst. key receives the row once the batch has run.
func IdempotencyKeyInsert(batch *pgx.Batch, params IdempotencyKeyInsertParams, lease time.Duration, key *IdempotencyKey) {
	p := params.Progress
	batch.Queue(`
		INSERT INTO idempotency_keys (id, idempotency_key, locked_at, locked_until, lock_generation,
			request_method, request_params, request_path, origin_ip, recovery_point, response_code,
			response_body, stripe_idempotency_key, charge_attempted_at, user_id)
		VALUES ($1, $2, now() + make_interval(secs => $15), now() + make_interval(secs => $13),
			$14, $3, $4, $5, $6, $7, $8, $9, $10, now() + make_interval(secs => $11), $12)
		RETURNING `+idempotencyKeyColumns,
		params.ID, params.IdempotencyKey, params.RequestMethod, params.RequestParams,
		params.RequestPath, params.OriginIP, p.RecoveryPoint, p.ResponseCode, p.ResponseBody,
		params.StripeIdempotencyKey, secondsIf(p.ForeignMutationAttempted, 0), params.UserID,
		secondsIf(p.RecoveryPoint != RecoveryPointFinished, lease.Seconds()), LockGenerationFirst,
		secondsIf(p.RecoveryPoint != RecoveryPointFinished, 0),
	).QueryRow(func(row pgx.Row) error {
		k, err := scanIdempotencyKey(row)
		if err != nil {
			return fmt.Errorf("error inserting idempotency key: %w", err)
		}
		*key = *k
		return nil
	})
}

// secondsIf is secs when on holds, else NULL: the writes below set a time as now() plus
// make_interval(secs => secondsIf(...)), which is NULL when the time is not to be set. Citus
// refuses now() inside CASE or COALESCE, which these would otherwise take; least() keeps an
// earlier time against a NULL.
func secondsIf(on bool, secs float64) *float64 {
	if !on {
		return nil
	}
	return &secs
}

// IdempotencyKeyRecordProgress queues on batch the write of an atomic phase's progress on an
// existing key, which also renews its lease for lease, or releases it when the key finished. It
// is fenced: it writes only while the key is still locked with generation, the lock generation
// of the caller's request, and otherwise fails with ErrLockLost (another request took the key
// over, or it was reaped) when the batch runs. key receives the row.
func IdempotencyKeyRecordProgress(batch *pgx.Batch, userID, id, generation int64, lease time.Duration, progress IdempotencyKeyProgress, key *IdempotencyKey) {
	batch.Queue(`
		UPDATE idempotency_keys
		SET recovery_point = $3,
			locked_at = CASE WHEN $3 = 'finished' THEN NULL ELSE locked_at END,
			locked_until = now() + make_interval(secs => $7),
			response_code = $4,
			response_body = $5,
			charge_attempted_at = least(charge_attempted_at, now() + make_interval(secs => $6))
		WHERE user_id = $8 AND id = $1 AND lock_generation = $2 AND locked_until IS NOT NULL
		RETURNING `+idempotencyKeyColumns,
		id, generation, progress.RecoveryPoint, progress.ResponseCode, progress.ResponseBody,
		secondsIf(progress.ForeignMutationAttempted, 0),
		secondsIf(progress.RecoveryPoint != RecoveryPointFinished, lease.Seconds()), userID,
	).QueryRow(func(row pgx.Row) error {
		k, err := scanIdempotencyKey(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLockLost
		}
		if err != nil {
			return fmt.Errorf("error recording progress of idempotency key %d: %w", id, err)
		}
		*key = *k
		return nil
	})
}

// IdempotencyKeyLock takes the lock of an unfinished key for a new run, but only if nobody holds
// it: it was never locked, or released, or its holder's lease ran out. It leases the key for
// lease and moves the lock generation on; the new generation is the caller's fencing token. It
// returns ErrNotFound when someone else holds the key.
func IdempotencyKeyLock(ctx context.Context, db DBTX, userID, id int64, lease time.Duration) (*IdempotencyKey, error) {
	k, err := scanIdempotencyKey(db.QueryRow(ctx, `
		UPDATE idempotency_keys
		SET locked_at = now(), locked_until = now() + make_interval(secs => $2),
			lock_generation = lock_generation + 1, last_run_at = now()
		WHERE user_id = $3 AND id = $1
			AND recovery_point <> 'finished'
			AND (locked_until IS NULL OR locked_until <= now())
		RETURNING `+idempotencyKeyColumns, id, lease.Seconds(), userID))
	if err != nil {
		return nil, fmt.Errorf("error locking idempotency key %d: %w", id, notFound(err))
	}
	return k, nil
}

// IdempotencyKeyRenewLease extends the lease of a key that the caller's request, of lock
// generation generation, still holds, to lease from now. It reports false when the request no
// longer holds it.
func IdempotencyKeyRenewLease(ctx context.Context, db DBTX, userID, id, generation int64, lease time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, `
		UPDATE idempotency_keys
		SET locked_until = now() + make_interval(secs => $3)
		WHERE user_id = $4 AND id = $1 AND lock_generation = $2 AND locked_until IS NOT NULL`,
		id, generation, lease.Seconds(), userID)
	if err != nil {
		return false, fmt.Errorf("error renewing lease of idempotency key %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// IdempotencyKeyUnlock releases a key after a failed run so that a retry need not wait for the
// lease to run out, and records why the run failed. It only releases the lock of the caller's
// generation: a request whose key was taken over must not release its successor's.
func IdempotencyKeyUnlock(ctx context.Context, db DBTX, userID, id, generation int64, lastError string) (bool, error) {
	tag, err := db.Exec(ctx, `
		UPDATE idempotency_keys
		SET locked_at = NULL, locked_until = NULL, last_error = $3
		WHERE user_id = $4 AND id = $1 AND lock_generation = $2 AND locked_until IS NOT NULL`,
		id, generation, SanitizeErrorText(lastError), userID)
	if err != nil {
		return false, fmt.Errorf("error unlocking idempotency key %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// IdempotencyKeyForeignMutationOlderThan reports whether the key's Stripe call was first
// attempted longer than maxAge ago, by the database's clock. A call never attempted is not.
func IdempotencyKeyForeignMutationOlderThan(ctx context.Context, db DBTX, userID, id int64, maxAge time.Duration) (bool, error) {
	var older bool
	err := db.QueryRow(ctx, `
		SELECT charge_attempted_at IS NOT NULL AND charge_attempted_at <= now() - make_interval(secs => $2)
		FROM idempotency_keys
		WHERE user_id = $3 AND id = $1`, id, maxAge.Seconds(), userID).Scan(&older)
	if err != nil {
		return false, fmt.Errorf("error checking charge attempt of idempotency key %d: %w", id, notFound(err))
	}
	return older, nil
}

// maxErrorTextLen is the CHECK on idempotency_keys.last_error.
const maxErrorTextLen = 2000

// SanitizeErrorText makes an error message storable in a text column: Postgres rejects NUL bytes
// and invalid UTF-8, which error texts quoting a remote server's answer may well contain, and a
// rejected write here would leave a key locked.
func SanitizeErrorText(text string) string {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	if r := []rune(text); len(r) > maxErrorTextLen {
		text = string(r[:maxErrorTextLen])
	}
	return text
}

// IdempotencyKeyListIdleUnfinishedParams says which unfinished keys count as abandoned by their
// client. Every duration is measured back from the database's now(), never the caller's clock.
type IdempotencyKeyListIdleUnfinishedParams struct {
	// MinAge: keys created more recently are left to their client's own retries.
	MinAge time.Duration

	// MaxAge: keys created longer ago are left to the reaper (see completer.Config.ReapAfter).
	MaxAge time.Duration

	// IdleFor: keys run more recently than this are left alone.
	IdleFor time.Duration

	// Limit bounds the batch.
	Limit int
}

// IdempotencyKeyListIdleUnfinished returns unfinished keys that nobody has run for a while and
// nobody holds a live lock on, least recently run first, for the completer to push to the end.
// It locks nothing: the caller takes each key's lock the way any request does, and a key taken
// by someone else between this read and that lock is simply in use.
//
// The order and the recovery_point predicate match the partial index
// idempotency_keys_unfinished_last_run_at, so the scan touches only unfinished keys, which a
// healthy system has few of. Least recently run first also means a key that keeps failing (each
// run bumps last_run_at) goes to the back and cannot starve the others.
func IdempotencyKeyListIdleUnfinished(ctx context.Context, db DBTX, params IdempotencyKeyListIdleUnfinishedParams) ([]*IdempotencyKey, error) {
	rows, err := db.Query(ctx, `
		SELECT `+idempotencyKeyColumns+`
		FROM idempotency_keys
		WHERE recovery_point <> 'finished'
			AND last_run_at <= now() - make_interval(secs => $1)
			AND created_at <= now() - make_interval(secs => $2)
			AND created_at > now() - make_interval(secs => $3)
			AND (locked_until IS NULL OR locked_until <= now())
		ORDER BY last_run_at
		LIMIT $4`,
		params.IdleFor.Seconds(), params.MinAge.Seconds(), params.MaxAge.Seconds(), params.Limit)
	if err != nil {
		return nil, fmt.Errorf("error listing idle unfinished idempotency keys: %w", err)
	}
	keys, err := scanIdempotencyKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("error listing idle unfinished idempotency keys: %w", err)
	}
	return keys, nil
}

// IdempotencyKeyListReapableForUpdate returns up to limit keys created more than reapAfter ago,
// oldest first, and locks their rows for the caller's transaction. Rows another transaction has
// locked are skipped rather than waited for, which is what lets two reapers work side by side
// without taking, recording or deleting the same key twice.
//
// A key whose lease has not run out is skipped too: some request is working it right now,
// between its atomic phases (so no row lock shows it), perhaps in the middle of a Stripe call.
// Deleting it under that request could lose a charge's outcome; the next pass gets it.
func IdempotencyKeyListReapableForUpdate(ctx context.Context, db DBTX, reapAfter time.Duration, limit int) ([]*IdempotencyKey, error) {
	rows, err := db.Query(ctx, `
		SELECT `+idempotencyKeyColumns+`
		FROM idempotency_keys
		WHERE created_at <= now() - make_interval(secs => $1)
			AND (locked_until IS NULL OR locked_until <= now())
		ORDER BY created_at
		LIMIT $2
		FOR UPDATE SKIP LOCKED`, reapAfter.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("error listing idempotency keys to reap: %w", err)
	}
	keys, err := scanIdempotencyKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("error listing idempotency keys to reap: %w", err)
	}
	return keys, nil
}

// IdempotencyKeyListReapableByRider returns and locks the keys IdempotencyKeyListReapableForUpdate
// does, for a database whose keys are distributed by rider (Citus), which refuses a FOR UPDATE that
// spans shards: it reads the oldest candidates without a lock, then locks each rider's among them
// with a statement routed to the rider's shard, all sent in one round trip, skipping those a
// request or another reaper holds.
func IdempotencyKeyListReapableByRider(ctx context.Context, tx pgx.Tx, reapAfter time.Duration, limit int) ([]*IdempotencyKey, error) {
	rows, err := tx.Query(ctx, `
		SELECT user_id, id
		FROM idempotency_keys
		WHERE created_at <= now() - make_interval(secs => $1)
			AND (locked_until IS NULL OR locked_until <= now())
		ORDER BY created_at
		LIMIT $2`, reapAfter.Seconds(), limit)
	riders, byRider, err := groupByRider(rows, err)
	if err != nil {
		return nil, fmt.Errorf("error listing idempotency keys to reap: %w", err)
	}
	batch := &pgx.Batch{}
	var keys []*IdempotencyKey
	for _, rider := range riders {
		batch.Queue(`
			SELECT `+idempotencyKeyColumns+`
			FROM idempotency_keys
			WHERE user_id = $1 AND id = ANY($2)
				AND (locked_until IS NULL OR locked_until <= now())
			FOR UPDATE SKIP LOCKED`, rider, byRider[rider],
		).Query(func(rows pgx.Rows) error {
			locked, err := scanIdempotencyKeys(rows)
			keys = append(keys, locked...)
			return err
		})
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("error locking idempotency keys to reap: %w", err)
	}
	return keys, nil
}

// IdempotencyKeyClearReferences sets to NULL what names keys in rides and abandoned_requests,
// rider by rider, as the foreign keys' ON DELETE SET NULL does on a single Postgres: Citus
// refuses SET NULL on a foreign key that includes the distribution column, so on Citus the
// reaper clears them before it deletes the keys.
func IdempotencyKeyClearReferences(ctx context.Context, tx pgx.Tx, keys []*IdempotencyKey) error {
	batch := &pgx.Batch{}
	for _, k := range keys {
		batch.Queue(`UPDATE rides SET idempotency_key_id = NULL WHERE user_id = $1 AND idempotency_key_id = $2`, k.UserID, k.ID)
		batch.Queue(`UPDATE rides SET cancel_idempotency_key_id = NULL WHERE user_id = $1 AND cancel_idempotency_key_id = $2`, k.UserID, k.ID)
		batch.Queue(`UPDATE abandoned_requests SET idempotency_key_id = NULL WHERE user_id = $1 AND idempotency_key_id = $2`, k.UserID, k.ID)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("error clearing references to idempotency keys: %w", err)
	}
	return nil
}

// IdempotencyKeyDeleteKeys deletes keys and returns how many were deleted. Their rides stay,
// with idempotency_key_id set to NULL by the foreign key: a ride is a record of a trip and a
// charge, a key only of how the request went. The riders name the keys' shards on Citus, and
// lead the primary key's index everywhere.
func IdempotencyKeyDeleteKeys(ctx context.Context, db DBTX, keys []*IdempotencyKey) (int, error) {
	riders := make([]int64, len(keys))
	ids := make([]int64, len(keys))
	for i, k := range keys {
		riders[i], ids[i] = k.UserID, k.ID
	}
	tag, err := db.Exec(ctx, `
		DELETE FROM idempotency_keys
		WHERE user_id = ANY($2) AND id = ANY($1)`, ids, riders)
	if err != nil {
		return 0, fmt.Errorf("error deleting idempotency keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// scanIdempotencyKeys reads every row of a query selecting idempotencyKeyColumns, and closes it.
func scanIdempotencyKeys(rows pgx.Rows) ([]*IdempotencyKey, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*IdempotencyKey, error) {
		return scanIdempotencyKey(row)
	})
}
