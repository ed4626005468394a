package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
)

// TestRetryLockTimeoutsRebuildsAnIndexLeftInvalid: a migration's CREATE INDEX CONCURRENTLY that
// times out waiting for a writer's transaction leaves its index behind, invalid. The retry, once
// the writer is done, builds the index again rather than taking the invalid one for done, as its
// IF NOT EXISTS would.
func TestRetryLockTimeoutsRebuildsAnIndexLeftInvalid(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, db := withoutChargeIndex(t)

	tx := holdInTransaction(t, url, `UPDATE rides SET stripe_charge_id = NULL WHERE false`)

	attempts := 0
	err := migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) error {
		attempts++
		_, err := db.ExecContext(ctx, `CREATE INDEX CONCURRENTLY IF NOT EXISTS rides_stripe_charge_id ON rides (stripe_charge_id)`)
		if attempts == 1 {
			// The writer is done before the retry, whose first step drops the index the
			// timed-out build left.
			if err := tx.Commit(ctx); err != nil {
				t.Errorf("error ending the writer's transaction: %v", err)
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("want the index built once the writer was done, got %v", err)
	}
	if attempts != 2 {
		t.Errorf("want 2 attempts, the first timed out, got %d", attempts)
	}
	var valid bool
	if err := db.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'rides_stripe_charge_id'::regclass`).Scan(&valid); err != nil {
		t.Fatal(err)
	}
	if !valid {
		t.Fatal("want the index valid, got the one the timed-out build left invalid")
	}
}

// TestRetryLockTimeoutsLeavesOthersInvalidIndexesAlone: an invalid index that no migration of
// ours builds is someone else's, an operator's build that failed or is still running, and
// stays: so does one that bears a migration's index name in another schema.
func TestRetryLockTimeoutsLeavesOthersInvalidIndexesAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := migrations.Open(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A unique index built concurrently on duplicates fails and stays behind, invalid.
	for _, stmt := range []string{
		`CREATE TABLE probe (n int NOT NULL)`,
		`INSERT INTO probe VALUES (1), (1)`,
		`CREATE SCHEMA ops`,
		`CREATE TABLE ops.rides (stripe_charge_id text)`,
		`INSERT INTO ops.rides VALUES ('ch_1'), ('ch_1')`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`CREATE UNIQUE INDEX CONCURRENTLY probe_n ON probe (n)`,
		`CREATE UNIQUE INDEX CONCURRENTLY rides_stripe_charge_id ON ops.rides (stripe_charge_id)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil {
			t.Fatalf("want %q to fail on duplicates, it succeeded", stmt)
		}
	}

	err = migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, index := range []string{"public.probe_n", "ops.rides_stripe_charge_id"} {
		var valid bool
		err := db.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, index).Scan(&valid)
		if errors.Is(err, sql.ErrNoRows) {
			t.Errorf("want %s left alone, it was dropped", index)
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetryLockTimeoutsLeavesABuildInProgress: a migration's index that another session is
// still building is invalid until the build ends. The migration waits for the build and then
// keeps the index it made valid.
func TestRetryLockTimeoutsLeavesABuildInProgress(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, db := withoutChargeIndex(t)
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
		return conn
	}

	// A writer's transaction holds the build up, its index invalid.
	builder := connect()
	tx := holdInTransaction(t, url, `UPDATE rides SET stripe_charge_id = NULL WHERE false`)
	built := make(chan error, 1)
	go func() {
		_, err := builder.Exec(ctx, `CREATE INDEX CONCURRENTLY rides_stripe_charge_id ON rides (stripe_charge_id)`)
		built <- err
	}()
	waitForLockWait(t, db, `pid = `+itoa(builder.PgConn().PID()))

	migrated := make(chan error, 1)
	go func() {
		migrated <- migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) error { return nil })
	}()
	waitForLockTry(t, db)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-built; err != nil {
		t.Fatalf("want the build to finish, got %v", err)
	}
	if err := <-migrated; err != nil {
		t.Fatal(err)
	}
	var valid bool
	err := db.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('rides_stripe_charge_id')`).Scan(&valid)
	if errors.Is(err, sql.ErrNoRows) {
		t.Fatal("want the index that the build finished kept, it was dropped")
	} else if err != nil {
		t.Fatal(err)
	}
	if !valid {
		t.Fatal("want the index valid once built")
	}
}

// waitForLockWait waits until a session of this database that matches where waits for a lock.
func waitForLockWait(t *testing.T, db *sql.DB, where string) {
	t.Helper()
	for {
		var waiting bool
		err := db.QueryRowContext(t.Context(), `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND `+where+`)`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// waitForLockTry waits until a migration session has asked for a lock and, refused, rolled back.
func waitForLockTry(t *testing.T, db *sql.DB) {
	t.Helper()
	for {
		var tried bool
		err := db.QueryRowContext(t.Context(), `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND query = 'rollback')`,
			migrations.ApplicationName).Scan(&tried)
		if err != nil {
			t.Fatal(err)
		}
		if tried {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestIndexBuildGivesUpOnAnOlderSnapshotOfAnyTable: CREATE INDEX CONCURRENTLY waits for the
// transactions that hold a snapshot older than its build, whichever tables they read, and that
// wait obeys LockTimeout. A READ COMMITTED transaction idle between statements holds no
// snapshot, and the build does not wait for it unless it writes the build's table.
func TestIndexBuildGivesUpOnAnOlderSnapshotOfAnyTable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, isolation, stmt string
		wantTimeout           bool
	}{
		{"ReadCommittedWriterOfAnotherTable", "READ COMMITTED", `INSERT INTO other VALUES (1)`, false},
		{"RepeatableReadReaderOfAnotherTable", "REPEATABLE READ", `SELECT count(*) FROM other`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := dbtest.NewDB(t)
			db, err := migrations.Open(url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, `CREATE TABLE probe (n int); CREATE TABLE other (n int)`); err != nil {
				t.Fatal(err)
			}
			holdInTransaction(t, url, `SET TRANSACTION ISOLATION LEVEL `+tt.isolation, tt.stmt)

			_, err = db.ExecContext(ctx, `CREATE INDEX CONCURRENTLY probe_n ON probe (n)`)
			if tt.wantTimeout && !migrations.IsLockTimeout(err) {
				t.Fatalf("want the build to give up on the older snapshot, got %v", err)
			}
			if !tt.wantTimeout && err != nil {
				t.Fatalf("want the build done, got %v", err)
			}
		})
	}
}

// holdInTransaction runs stmts in a transaction of a connection of its own to url, and leaves
// the transaction open, holding what they took, until the caller ends it or the test does.
func holdInTransaction(t *testing.T, url string, stmts ...string) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}

// withoutChargeIndex opens a database of the test's own, migrated but for an index of migration
// 12 (rides_stripe_charge_id), as if that migration had not run yet; closed when the test ends.
func withoutChargeIndex(t *testing.T) (url string, db *sql.DB) {
	t.Helper()
	url = dbtest.NewDB(t)
	db, err := migrations.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(t.Context(), `DROP INDEX rides_stripe_charge_id`); err != nil {
		t.Fatal(err)
	}
	return url, db
}
