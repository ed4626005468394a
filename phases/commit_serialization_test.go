package phases

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Citus reports a serialization failure that a worker found at COMMIT as an XX000 ("could not
// commit transaction for shard … on at least one active node"), the 40001 only in a WARNING
// before it. A deferred constraint trigger plays that on plain Postgres: at the first request's
// COMMIT it sends the WARNING (or not) and fails with XX000; a sequence, which no rollback takes
// back, makes it strike once.
func TestCommitTimeSerializationFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	failCommitOnce := func(t *testing.T, b *testBundle, warning bool) {
		t.Helper()
		warn := ""
		if warning {
			warn = `RAISE WARNING 'could not serialize access due to read/write dependencies among transactions' USING ERRCODE = '40001';`
		}
		b.Exec(t, `CREATE SEQUENCE commit_failures`)
		b.Exec(t, `CREATE FUNCTION fail_commit_as_citus() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF nextval('commit_failures') = 1 THEN
					`+warn+`
					RAISE EXCEPTION 'could not commit transaction for shard 102008 on at least one active node' USING ERRCODE = 'XX000';
				END IF;
				RETURN NULL;
			END $$`)
		b.Exec(t, `CREATE CONSTRAINT TRIGGER fail_commit_as_citus AFTER INSERT ON idempotency_keys
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_commit_as_citus()`)
	}

	t.Run("WithTheWarningItIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		failCommitOnce(t, b, true)
		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	// An XX000 alone is no serialization failure: nothing says that retrying is safe or useful.
	t.Run("WithoutItItIsNot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		failCommitOnce(t, b, false)
		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "XX000" || errors.Is(err, ErrConflict) {
			t.Fatalf("want the XX000 returned as it is, got %v", err)
		}
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Fatalf("want nothing committed, got %d keys", n)
		}
	})
}
