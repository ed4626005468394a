package invariants

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
)

// snapshot is the database as the checker sees it: the rows of every table an invariant
// speaks of, read in one REPEATABLE READ transaction so that they are consistent with each
// other. The SQL is here rather than in models on purpose: an auditor that read through the
// code it audits would inherit that code's mistakes.
type snapshot struct {
	keys         []keyRow
	rides        []rideRow
	abandoned    []abandonedRow
	stagedJobs   []stagedJobRow
	receiptJobs  []riverJobRow // both kinds: the ride's receipt and the refund's
	stripeEvents []stripeEventRow
}

type keyRow struct {
	ID                   int64
	UserID               int64
	IdempotencyKey       string
	RequestPath          string // /rides for a booking, /rides/{id}/cancel for a cancel
	RecoveryPoint        string
	LockedAt             *time.Time
	ResponseCode         *int
	ResponseProblemCode  *string // response_body->>'code' of an error response
	ResponseRideID       *int64  // response_body->'ride'->>'id' of a 201 or a cancel's 200
	ResponseChargeID     *string // response_body->'ride'->>'stripe_charge_id' of a 201 or 200
	ResponseRefundID     *string // response_body->'ride'->>'stripe_refund_id' of a cancel's 200
	StripeIdempotencyKey string
	LastError            *string
}

type rideRow struct {
	ID                     int64
	UserID                 int64
	IdempotencyKeyID       *int64
	StripeChargeID         *string
	ReceiptSentAt          *time.Time
	ReceiptMessageID       *string
	Status                 string // booked, declined, refunded, cancelled or disputed
	StripeRefundID         *string
	CancelIdempotencyKeyID *int64
	RefundReceiptSentAt    *time.Time
	RefundReceiptMessageID *string
	UserEmail              string
	StripeCustomerID       string
}

type abandonedRow struct {
	ID               int64
	IdempotencyKeyID *int64
	IdempotencyKey   string
	UserID           int64
	Reason           string
	RideID           *int64
}

type stagedJobRow struct {
	ID      int64
	JobName string
	JobArgs string
}

type riverJobRow struct {
	ID      int64
	Kind    string // jobargs.SendRideReceiptKind or jobargs.SendRefundReceiptKind
	State   string
	RideID  *int64
	Attempt int
}

type stripeEventRow struct {
	ID     string
	Type   string
	RideID *int64
}

// Beginner starts transactions: *pgxpool.Pool and *pgx.Conn both do.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

func readSnapshot(ctx context.Context, db Beginner) (*snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("error beginning snapshot transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // read only: nothing to keep

	s := &snapshot{}
	if s.keys, err = queryAll(ctx, tx, `
		SELECT id, user_id, idempotency_key, request_path, recovery_point, locked_at, response_code,
		       response_body->>'code', (response_body->'ride'->>'id')::bigint,
		       response_body->'ride'->>'stripe_charge_id', response_body->'ride'->>'stripe_refund_id',
		       stripe_idempotency_key, last_error
		FROM idempotency_keys ORDER BY id`,
		func(row pgx.Rows, k *keyRow) error {
			return row.Scan(&k.ID, &k.UserID, &k.IdempotencyKey, &k.RequestPath, &k.RecoveryPoint, &k.LockedAt,
				&k.ResponseCode, &k.ResponseProblemCode, &k.ResponseRideID, &k.ResponseChargeID,
				&k.ResponseRefundID, &k.StripeIdempotencyKey, &k.LastError)
		}); err != nil {
		return nil, fmt.Errorf("error reading idempotency keys: %w", err)
	}
	if s.rides, err = queryAll(ctx, tx, `
		SELECT r.id, r.user_id, r.idempotency_key_id, r.stripe_charge_id, r.receipt_sent_at,
		       r.receipt_message_id, r.status, r.stripe_refund_id, r.cancel_idempotency_key_id,
		       r.refund_receipt_sent_at, r.refund_receipt_message_id, u.email, u.stripe_customer_id
		FROM rides r JOIN users u ON u.id = r.user_id ORDER BY r.id`,
		func(row pgx.Rows, r *rideRow) error {
			return row.Scan(&r.ID, &r.UserID, &r.IdempotencyKeyID, &r.StripeChargeID, &r.ReceiptSentAt,
				&r.ReceiptMessageID, &r.Status, &r.StripeRefundID, &r.CancelIdempotencyKeyID,
				&r.RefundReceiptSentAt, &r.RefundReceiptMessageID, &r.UserEmail, &r.StripeCustomerID)
		}); err != nil {
		return nil, fmt.Errorf("error reading rides: %w", err)
	}
	if s.abandoned, err = queryAll(ctx, tx, `
		SELECT id, idempotency_key_id, idempotency_key, user_id, reason, ride_id
		FROM abandoned_requests ORDER BY id`,
		func(row pgx.Rows, a *abandonedRow) error {
			return row.Scan(&a.ID, &a.IdempotencyKeyID, &a.IdempotencyKey, &a.UserID, &a.Reason, &a.RideID)
		}); err != nil {
		return nil, fmt.Errorf("error reading abandoned requests: %w", err)
	}
	if s.stagedJobs, err = queryAll(ctx, tx, `SELECT id, job_name, job_args::text FROM staged_jobs ORDER BY id`,
		func(row pgx.Rows, j *stagedJobRow) error { return row.Scan(&j.ID, &j.JobName, &j.JobArgs) }); err != nil {
		return nil, fmt.Errorf("error reading staged jobs: %w", err)
	}
	if s.receiptJobs, err = queryAll(ctx, tx, `
		SELECT id, kind, state::text, (args->>'ride_id')::bigint, attempt
		FROM river_job WHERE kind = ANY($1) ORDER BY id`,
		func(row pgx.Rows, j *riverJobRow) error {
			return row.Scan(&j.ID, &j.Kind, &j.State, &j.RideID, &j.Attempt)
		},
		[]string{jobargs.SendRideReceiptKind, jobargs.SendRefundReceiptKind}); err != nil {
		return nil, fmt.Errorf("error reading receipt jobs: %w", err)
	}
	if s.stripeEvents, err = queryAll(ctx, tx, `SELECT id, type, ride_id FROM stripe_events ORDER BY id`,
		func(row pgx.Rows, e *stripeEventRow) error { return row.Scan(&e.ID, &e.Type, &e.RideID) }); err != nil {
		return nil, fmt.Errorf("error reading Stripe events: %w", err)
	}
	return s, nil
}

// queryAll runs sql and scans every row into a T.
func queryAll[T any](ctx context.Context, tx pgx.Tx, sql string, scan func(pgx.Rows, *T) error, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
