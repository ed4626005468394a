package models

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

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
