package migrations_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestStripeEventsKept: migration 00015 lets an event be kept for a charge no ride records yet,
// keeps taking the events of the release before it (a rolling deploy), refuses a kept event
// that names only half of what it does, and goes down and up again.
func TestStripeEventsKept(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, provider := migrated(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// The release before this one records events without the new columns.
	if _, err := conn.Exec(ctx, `INSERT INTO stripe_events (id, type, created_at) VALUES ('evt_old', 'charge.refunded', now())`); err != nil {
		t.Fatalf("want an event of the release before taken, got %v", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO stripe_events (id, type, created_at, charge_id, ride_status)
		VALUES ('evt_kept', 'charge.dispute.created', now(), 'ch_kept', 'disputed')`); err != nil {
		t.Fatal(err)
	}
	var kept []string
	rows, _ := conn.Query(ctx, `SELECT id FROM stripe_events WHERE charge_id = 'ch_kept' AND ride_id IS NULL`)
	if kept, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(kept) != 1 || kept[0] != "evt_kept" {
		t.Fatalf("want evt_kept kept for ch_kept, got %v, %v", kept, err)
	}
	for name, sql := range map[string]string{
		"ChargeWithoutStatus": `INSERT INTO stripe_events (id, type, created_at, charge_id) VALUES ('evt_a', 'charge.refunded', now(), 'ch_a')`,
		"StatusWithoutCharge": `INSERT INTO stripe_events (id, type, created_at, ride_status) VALUES ('evt_b', 'charge.refunded', now(), 'refunded')`,
		"NoEventsStatus":      `INSERT INTO stripe_events (id, type, created_at, charge_id, ride_status) VALUES ('evt_c', 'charge.refunded', now(), 'ch_c', 'cancelled')`,
	} {
		var pgErr *pgconn.PgError
		if _, err := conn.Exec(ctx, sql); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("%s: want a check violation, got %v", name, err)
		}
	}

	if _, err := provider.DownTo(ctx, 14); err != nil {
		t.Fatalf("error migrating down to 00014: %v", err)
	}
	var columns, indexes int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'stripe_events' AND column_name IN ('charge_id', 'ride_status')`).Scan(&columns); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname = 'stripe_events_kept_charge_id'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if columns != 0 || indexes != 0 {
		t.Fatalf("want the columns and the index gone, got %d columns and %d indexes", columns, indexes)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("error migrating up again: %v", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM stripe_events WHERE charge_id IS NULL AND ride_status IS NULL`).Scan(&columns); err != nil || columns != 2 {
		t.Fatalf("want both events back with no charge, got %d, %v", columns, err)
	}
}
