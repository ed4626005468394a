package models

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AbandonedReasonReapedUnfinished: the key reached the reaper's age without ever finishing, so
// neither its client nor the completer got it to a response, and deleting it would otherwise
// leave no trace of a request that may have created a ride or even charged for it.
const AbandonedReasonReapedUnfinished = "reaped_unfinished"

// IdempotencyKeyListIdleUnfinishedParams says which unfinished keys count as abandoned by their
// client. Every duration is measured back from the database's now(), never the caller's clock.
type IdempotencyKeyListIdleUnfinishedParams struct {
	// MinAge: keys created more recently are left to their client's own retries.
	MinAge time.Duration

	// MaxAge: keys created longer ago are left to the reaper (see the completer's MaxAge).
	MaxAge time.Duration

	// IdleFor: keys run more recently than this are left alone.
	IdleFor time.Duration

	// LockTimeout: a lock younger than this belongs to a request that is still running.
	LockTimeout time.Duration

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
			AND (locked_at IS NULL OR locked_at <= now() - make_interval(secs => $4))
		ORDER BY last_run_at
		LIMIT $5`,
		params.IdleFor.Seconds(), params.MinAge.Seconds(), params.MaxAge.Seconds(),
		params.LockTimeout.Seconds(), params.Limit)
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
// A key whose lock is younger than lockTimeout is skipped too: some request is working it right
// now, between its atomic phases (so no row lock shows it), perhaps in the middle of a Stripe
// call. Deleting it under that request could lose a charge's outcome; the next pass gets it.
func IdempotencyKeyListReapableForUpdate(ctx context.Context, db DBTX, reapAfter, lockTimeout time.Duration, limit int) ([]*IdempotencyKey, error) {
	rows, err := db.Query(ctx, `
		SELECT `+idempotencyKeyColumns+`
		FROM idempotency_keys
		WHERE created_at <= now() - make_interval(secs => $1)
			AND (locked_at IS NULL OR locked_at <= now() - make_interval(secs => $2))
		ORDER BY created_at
		LIMIT $3
		FOR UPDATE SKIP LOCKED`, reapAfter.Seconds(), lockTimeout.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("error listing idempotency keys to reap: %w", err)
	}
	keys, err := scanIdempotencyKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("error listing idempotency keys to reap: %w", err)
	}
	return keys, nil
}

// IdempotencyKeyDeleteByIDs deletes keys and returns how many were deleted. Their rides stay,
// with idempotency_key_id set to NULL by the foreign key: a ride is a record of a trip and a
// charge, a key only of how the request went.
func IdempotencyKeyDeleteByIDs(ctx context.Context, db DBTX, ids []int64) (int, error) {
	tag, err := db.Exec(ctx, `
		DELETE FROM idempotency_keys
		WHERE id = ANY($1)`, ids)
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
