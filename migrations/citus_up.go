package migrations

import (
	"context"
	"database/sql"
	"fmt"
)

// The Citus layout (docs/scale-out.md): users and the Stripe key secret are reference tables,
// copied to every worker; the rider tables are distributed by user_id, co-located, so that all
// of one rider's rows sit on one worker and every ride transaction runs there alone; River's
// tables and stripe_events (an event names no rider) stay plain tables on the coordinator.
var (
	citusReferenceTables = []string{"users", "stripe_key_secret"}

	// citusRiderTables are distributed in this order, each co-located with the first.
	citusRiderTables = []string{"idempotency_keys", "rides", "audit_records", "abandoned_requests", "staged_jobs"}

	// citusRefusedForeignKeys set only a recycled column to NULL on delete, which Citus refuses on
	// a key that includes the distribution column; on Citus the reaper clears those columns itself
	// (models.IdempotencyKeyClearReferences).
	citusRefusedForeignKeys = map[string][]string{
		"rides":              {"rides_idempotency_key_id_fkey", "rides_cancel_idempotency_key_id_fkey"},
		"abandoned_requests": {"abandoned_requests_idempotency_key_id_fkey", "abandoned_requests_ride_id_fkey"},
	}
)

// CitusUp lays the tables out for Citus when the database is a Citus coordinator (the citus
// extension exists), and does nothing on any other database. Up and `migrate up` run it after
// the migrations, every time: a table already laid out is left as it is, so it is safe to run
// again, and a database that gains the extension later is laid out by the next `migrate up`.
// It holds goose's advisory lock while it works, as RiverUp does: two processes migrating at once
// would both find a table not laid out yet, and the second would fail to lay it out again. It
// reports the tables it laid out.
func CitusUp(ctx context.Context, db *sql.DB) (done []string, err error) {
	err = withMigrationLock(ctx, db, func() error {
		done, err = citusUp(ctx, db)
		return err
	})
	return done, err
}

// citusUp is CitusUp, its caller holding the migration lock.
func citusUp(ctx context.Context, db *sql.DB) ([]string, error) {
	var citus bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return nil, fmt.Errorf("error looking for Citus: %w", err)
	}
	if !citus {
		return nil, nil
	}
	// A table is laid out once it is what it should be: a reference table (replicated to every
	// node, repmodel 't') or distributed by hash ('h'). Making users a reference table turns the
	// local tables that reference it into Citus local tables (partmethod 'n'), which are not.
	laidOut := func(table string) (bool, error) {
		var done bool
		err := db.QueryRowContext(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_dist_partition
				WHERE logicalrelid = $1::regclass AND (partmethod = 'h' OR repmodel = 't'))`, table).Scan(&done)
		return done, err
	}

	var done []string
	// The foreign keys between rider tables go first: a local table that references another
	// cannot be distributed apart from it.
	for _, table := range citusRiderTables {
		for _, fk := range citusRefusedForeignKeys[table] {
			if _, err := db.ExecContext(ctx, `ALTER TABLE `+table+` DROP CONSTRAINT IF EXISTS `+fk); err != nil {
				return done, fmt.Errorf("error dropping %s for Citus: %w", fk, err)
			}
		}
	}
	// staged_jobs's rider, nullable on a single Postgres (00012), becomes part of its key.
	if ok, err := laidOut("staged_jobs"); err != nil {
		return done, fmt.Errorf("error looking up staged_jobs in Citus: %w", err)
	} else if !ok {
		for _, sql := range []string{
			`ALTER TABLE staged_jobs ALTER COLUMN user_id SET NOT NULL`,
			`ALTER TABLE staged_jobs DROP CONSTRAINT IF EXISTS staged_jobs_pkey`,
			`ALTER TABLE staged_jobs ADD CONSTRAINT staged_jobs_pkey PRIMARY KEY (user_id, id)`,
		} {
			if _, err := db.ExecContext(ctx, sql); err != nil {
				return done, fmt.Errorf("error keying staged_jobs by rider for Citus: %w", err)
			}
		}
	}
	for _, table := range citusReferenceTables {
		if ok, err := laidOut(table); err != nil || ok {
			if err != nil {
				return done, fmt.Errorf("error looking up %s in Citus: %w", table, err)
			}
			continue
		}
		if _, err := db.ExecContext(ctx, `SELECT create_reference_table($1)`, table); err != nil {
			return done, fmt.Errorf("error making %s a reference table: %w", table, err)
		}
		done = append(done, table)
	}
	for i, table := range citusRiderTables {
		if ok, err := laidOut(table); err != nil || ok {
			if err != nil {
				return done, fmt.Errorf("error looking up %s in Citus: %w", table, err)
			}
			continue
		}
		colocate := "default"
		if i > 0 {
			colocate = citusRiderTables[0]
		}
		if _, err := db.ExecContext(ctx, `SELECT create_distributed_table($1, 'user_id', colocate_with => $2)`, table, colocate); err != nil {
			return done, fmt.Errorf("error distributing %s by user_id: %w", table, err)
		}
		done = append(done, table)
	}
	return done, nil
}
