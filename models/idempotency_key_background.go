package models

// The completer's and the reaper's queries on idempotency_keys. What one request does with its
// own key is in idempotency_key.go.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// IdempotencyKeyRetention is how long a key is kept before the reaper deletes it, and the
// default of both the reaper and the completer. It is long enough that a bug shipped on a
// Friday can be fixed on Monday, and the completer still finds the requests the bug broke.
const IdempotencyKeyRetention = 72 * time.Hour

// IdempotencyKeyListIdleUnfinishedParams say which unfinished keys count as abandoned by their
// client. Every duration counts back from the database's now(), never the caller's clock.
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

// IdempotencyKeyListIdleUnfinished returns the unfinished keys that nobody has run for a while
// and nobody holds, least recently run first, for the completer to finish. It locks nothing:
// the completer then locks each key as any request does, and finds a key that someone took in
// between simply in use.
//
// The order and the recovery_point test match the partial index
// idempotency_keys_unfinished_last_run_at, so the scan reads only unfinished keys, which a
// healthy system has few of. Each run moves last_run_at on, so a key that keeps failing goes to
// the back of the line and cannot starve the others.
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
// oldest first, and locks their rows until the caller's transaction ends. It skips rows another
// transaction has locked instead of waiting for them, so two reapers can work side by side
// without handling the same key twice.
//
// It also skips a key whose lease has not run out. Some request is working on that key right
// now, between two atomic phases (so no row lock shows it), perhaps in the middle of a Stripe
// call. Deleting the key under it could lose a charge's outcome; the next pass gets it.
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

// IdempotencyKeyListReapableByRider returns and locks the keys that
// IdempotencyKeyListReapableForUpdate does, on a database whose keys are distributed by rider
// (Citus). Citus refuses a FOR UPDATE that spans shards, so this reads the oldest candidates
// without a lock first. Then it locks each rider's candidates with a statement that Citus sends
// to the rider's shard, all in one round trip, and skips those a request or another reaper holds.
func IdempotencyKeyListReapableByRider(ctx context.Context, tx pgx.Tx, reapAfter time.Duration, limit int) ([]*IdempotencyKey, error) {
	rows, _ := tx.Query(ctx, `
		SELECT user_id, id
		FROM idempotency_keys
		WHERE created_at <= now() - make_interval(secs => $1)
			AND (locked_until IS NULL OR locked_until <= now())
		ORDER BY created_at
		LIMIT $2`, reapAfter.Seconds(), limit)
	riders, byRider, err := groupByRider(rows)
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

// IdempotencyKeyClearReferences sets to NULL every reference to keys in rides and
// abandoned_requests, rider by rider. On a single Postgres the foreign keys' ON DELETE SET NULL
// does this. Citus refuses SET NULL on a foreign key that includes the distribution column, so
// on Citus the reaper calls this before it deletes the keys.
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

// IdempotencyKeyDeleteKeys deletes keys and returns how many it deleted. Their rides stay, with
// idempotency_key_id set to NULL: a ride records a trip and a charge, a key only how the request
// went. The query names the keys' riders because the rider picks a key's shard on Citus and
// leads the primary key's index everywhere.
func IdempotencyKeyDeleteKeys(ctx context.Context, db DBTX, keys []*IdempotencyKey) (int, error) {
	riders := make([]int64, len(keys))
	ids := make([]int64, len(keys))
	for i, k := range keys {
		riders[i], ids[i] = k.UserID, k.ID
	}
	tag, err := db.Exec(ctx, `
		DELETE FROM idempotency_keys
		WHERE user_id = ANY($1) AND id = ANY($2)`, riders, ids)
	if err != nil {
		return 0, fmt.Errorf("error deleting idempotency keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// scanIdempotencyKeys reads every row of a query that selects idempotencyKeyColumns, and closes
// the rows.
func scanIdempotencyKeys(rows pgx.Rows) ([]*IdempotencyKey, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*IdempotencyKey, error) {
		return scanIdempotencyKey(row)
	})
}
