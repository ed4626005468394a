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
	// have forgotten our idempotency key, and sending it again could charge twice.
	AbandonedReasonStripeKeyExpired = "stripe_idempotency_key_expired"

	// AbandonedReasonStripeKeyConflict: Stripe refused our idempotency key because it was first
	// used with other charge parameters (say, the rider's Stripe customer changed between
	// attempts). Stripe will neither replay the first attempt nor charge again.
	AbandonedReasonStripeKeyConflict = "stripe_idempotency_key_conflict"

	// AbandonedReasonStripeReplayedError: Stripe failed while executing our charge and saved the
	// failure under our idempotency key. Every retry gets the same error back, and none can tell
	// whether a charge exists.
	AbandonedReasonStripeReplayedError = "stripe_replayed_error"

	// AbandonedReasonStripeRefundRefused: Stripe refused a cancel's refund for a reason of ours,
	// not because a refund or a dispute got there first. No retry changes that.
	AbandonedReasonStripeRefundRefused = "stripe_refund_refused"

	// AbandonedReasonChargeUnknown: a cancel of a ride whose booking ended without a known charge
	// (it went to review, or was reaped unfinished). Nothing can refund it until a person finds
	// out whether the rider paid.
	AbandonedReasonChargeUnknown = "charge_unknown"

	// AbandonedReasonReapedUnfinished: the key reached the reaper's age unfinished: neither its
	// client nor the completer got it to a response. Deleting it without this record would leave
	// no trace of a request that may have created a ride, or even charged for it.
	AbandonedReasonReapedUnfinished = "reaped_unfinished"
)

// AbandonedReasons lists the reasons above, so that a report can show each, even one that no
// request has.
var AbandonedReasons = []string{
	AbandonedReasonStripeKeyExpired, AbandonedReasonStripeKeyConflict,
	AbandonedReasonStripeReplayedError, AbandonedReasonStripeRefundRefused, AbandonedReasonChargeUnknown,
	AbandonedReasonReapedUnfinished,
}

// AbandonedRequest is a request the system gave up on, for a person to look at. It copies what
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
// its ride if any. An atomic phase calls it, and its key may be new, inserted earlier in the same
// batch. A new key's times are not known yet, so the database's now() stands in for them.
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

// AbandonedRequestList returns up to limit abandoned requests, the most recently recorded
// first, because an operator wants to see what went wrong lately.
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

// AbandonedRequestCountByReason counts the abandoned requests by reason. It has an entry for
// each of AbandonedReasons, 0 if none, and one for any other reason a row holds (written by
// another release, say).
func AbandonedRequestCountByReason(ctx context.Context, db DBTX) (map[string]int64, error) {
	counts, err := countByKey(ctx, db, AbandonedReasons, `SELECT reason, count(*) FROM abandoned_requests GROUP BY reason`)
	if err != nil {
		return nil, fmt.Errorf("error counting abandoned requests: %w", err)
	}
	return counts, nil
}
