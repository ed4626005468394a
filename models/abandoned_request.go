package models

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reasons a request is recorded as abandoned.
const (
	// AbandonedReasonStripeKeyExpired: the charge was first attempted so long ago that Stripe may
	// have forgotten our idempotency key, so re-sending it could charge twice.
	AbandonedReasonStripeKeyExpired = "stripe_idempotency_key_expired"

	// AbandonedReasonStripeKeyConflict: Stripe refused our idempotency key because it was first
	// used with other charge parameters (the rider's Stripe customer changed between attempts,
	// say), so it will neither replay the first attempt nor charge again.
	AbandonedReasonStripeKeyConflict = "stripe_idempotency_key_conflict"

	// AbandonedReasonStripeReplayedError: Stripe failed while executing our charge and saved that
	// failure under our idempotency key, so every retry gets the same error back and cannot tell
	// whether a charge exists.
	AbandonedReasonStripeReplayedError = "stripe_replayed_error"

	// AbandonedReasonStripeRefundRefused: Stripe refused a cancel's refund for a reason of ours
	// (not a refund or dispute that got there first), which no retry changes.
	AbandonedReasonStripeRefundRefused = "stripe_refund_refused"

	// AbandonedReasonChargeUnknown: a cancel of a ride whose booking ended without a known charge
	// (it went to review, or was reaped unfinished), which nothing can refund until a person
	// finds out whether the rider paid.
	AbandonedReasonChargeUnknown = "charge_unknown"

	// AbandonedReasonReapedUnfinished: the key reached the reaper's age without ever finishing,
	// so neither its client nor the completer got it to a response, and deleting it would
	// otherwise leave no trace of a request that may have created a ride or even charged for it.
	AbandonedReasonReapedUnfinished = "reaped_unfinished"
)

// AbandonedReasons are the reasons above, for reports that show each, none included.
var AbandonedReasons = []string{
	AbandonedReasonStripeKeyExpired, AbandonedReasonStripeKeyConflict,
	AbandonedReasonStripeReplayedError, AbandonedReasonStripeRefundRefused, AbandonedReasonChargeUnknown,
	AbandonedReasonReapedUnfinished,
}

// AbandonedRequest is a request the system gave up on and a human must look at. It copies what
// the idempotency key said, because keys are reaped and these rows are not.
type AbandonedRequest struct {
	ID               int64
	CreatedAt        time.Time
	Reason           string
	IdempotencyKeyID *int64
	IdempotencyKey   string
	UserID           int64
	RequestParams    []byte
	RecoveryPoint    RecoveryPoint
	LastError        *string
	KeyCreatedAt     time.Time
	KeyLastRunAt     time.Time
	RideID           *int64
}

// AbandonedRequestQueueFromKey queues on batch the record of key as abandoned for reason, with
// its ride if any: for an atomic phase, whose key may be new, inserted ahead of this in the same
// batch. A new key's times are not known yet; the database's now() stands for them.
func AbandonedRequestQueueFromKey(batch *pgx.Batch, key *IdempotencyKey, reason string, rideID *int64) {
	var createdAt, lastRunAt *time.Time
	if !key.CreatedAt.IsZero() {
		createdAt, lastRunAt = &key.CreatedAt, &key.LastRunAt
	}
	batch.Queue(`
		INSERT INTO abandoned_requests (reason, idempotency_key_id, idempotency_key, user_id,
			request_params, recovery_point, last_error, key_created_at, key_last_run_at, ride_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, least($8::timestamptz, now()), least($9::timestamptz, now()), $10)`,
		reason, key.ID, key.IdempotencyKey, key.UserID, key.RequestParams, key.RecoveryPoint,
		key.LastError, createdAt, lastRunAt, rideID,
	).Exec(func(pgconn.CommandTag) error { return nil })
}

// AbandonedRequestInsertFromKey records key as abandoned for reason, with the ride it created
// if any.
func AbandonedRequestInsertFromKey(ctx context.Context, db DBTX, key *IdempotencyKey, reason string, rideID *int64) (*AbandonedRequest, error) {
	var r AbandonedRequest
	err := db.QueryRow(ctx, `
		INSERT INTO abandoned_requests (reason, idempotency_key_id, idempotency_key, user_id,
			request_params, recovery_point, last_error, key_created_at, key_last_run_at, ride_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		RETURNING id, created_at, reason, idempotency_key_id, idempotency_key, user_id,
			request_params, recovery_point, last_error, key_created_at, key_last_run_at, ride_id`,
		reason, key.ID, key.IdempotencyKey, key.UserID, key.RequestParams, key.RecoveryPoint,
		key.LastError, key.CreatedAt, key.LastRunAt, rideID).
		Scan(&r.ID, &r.CreatedAt, &r.Reason, &r.IdempotencyKeyID, &r.IdempotencyKey, &r.UserID,
			&r.RequestParams, &r.RecoveryPoint, &r.LastError, &r.KeyCreatedAt, &r.KeyLastRunAt, &r.RideID)
	if err != nil {
		return nil, fmt.Errorf("error recording abandoned request for idempotency key %d: %w", key.ID, err)
	}
	return &r, nil
}

// AbandonedRequestList returns up to limit abandoned requests, the most recently recorded first:
// an operator looking at them wants to see what went wrong lately.
func AbandonedRequestList(ctx context.Context, db DBTX, limit int) ([]*AbandonedRequest, error) {
	rows, err := db.Query(ctx, `
		SELECT id, created_at, reason, idempotency_key_id, idempotency_key, user_id,
			request_params, recovery_point, last_error, key_created_at, key_last_run_at, ride_id
		FROM abandoned_requests
		ORDER BY created_at DESC, id DESC
		LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing abandoned requests: %w", err)
	}
	requests, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*AbandonedRequest, error) {
		var r AbandonedRequest
		err := row.Scan(&r.ID, &r.CreatedAt, &r.Reason, &r.IdempotencyKeyID, &r.IdempotencyKey,
			&r.UserID, &r.RequestParams, &r.RecoveryPoint, &r.LastError, &r.KeyCreatedAt,
			&r.KeyLastRunAt, &r.RideID)
		return &r, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing abandoned requests: %w", err)
	}
	return requests, nil
}

// AbandonedRequestCountByReason counts the abandoned requests by reason: one entry for each of
// AbandonedReasons, 0 if none, and one for any other reason a row holds (written by another
// release, say).
func AbandonedRequestCountByReason(ctx context.Context, db DBTX) (map[string]int64, error) {
	counts, err := countByKey(ctx, db, AbandonedReasons, `SELECT reason, count(*) FROM abandoned_requests GROUP BY reason`)
	if err != nil {
		return nil, fmt.Errorf("error counting abandoned requests: %w", err)
	}
	return counts, nil
}
