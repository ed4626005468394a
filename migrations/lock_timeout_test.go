package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
)

// TestRetryLockTimeoutsRebuildsAnIndexLeftInvalid: a CREATE INDEX CONCURRENTLY that times out
// waiting for a writer's transaction leaves its index behind, invalid. The retry, once the writer
// is done, builds the index again rather than taking the invalid one for done, as its IF NOT
// EXISTS would.
func TestRetryLockTimeoutsRebuildsAnIndexLeftInvalid(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	db, err := migrations.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE probe (n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	writer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Close(context.WithoutCancel(ctx)) }()
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO probe VALUES (1)`); err != nil {
		t.Fatal(err)
	}

	attempts := 0
	err = migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) error {
		attempts++
		_, err := db.ExecContext(ctx, `CREATE INDEX CONCURRENTLY IF NOT EXISTS probe_n ON probe (n)`)
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
	if err := db.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'probe_n'::regclass`).Scan(&valid); err != nil {
		t.Fatal(err)
	}
	if !valid {
		t.Fatal("want the index valid, got the one the timed-out build left invalid")
	}
}
