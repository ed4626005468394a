package phases

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

// Citus reports a serialization failure that a worker found at COMMIT as an XX000 ("could not
// commit transaction for shard … on at least one active node"), the 40001 only in a WARNING
// before it. A deferred constraint trigger fails the first request's COMMIT once (a sequence,
// which no rollback takes back, counts): on plain Postgres it plays Citus, sending the WARNING
// (or not) and failing with XX000; under TEST_CITUS it runs on the worker holding the rider's
// shard and fails that worker's COMMIT with a real 40001 (or an XX000), which the coordinator
// reports as it does any worker's.
func TestCommitTimeSerializationFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	failCommitOnce := func(t *testing.T, b *testBundle, warning bool) {
		t.Helper()
		if dbtest.OnCitus() {
			code := "XX000"
			if warning {
				code = "40001"
			}
			// Citus propagates the function but not the sequence, which the worker's trigger uses.
			b.Exec(t, `SELECT run_command_on_workers('CREATE SEQUENCE commit_failures')`)
			b.Exec(t, `CREATE FUNCTION fail_commit_on_worker() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF nextval('commit_failures') = 1 THEN
						RAISE EXCEPTION 'could not serialize access, at commit' USING ERRCODE = '`+code+`';
					END IF;
					RETURN NULL;
				END $$`)
			if err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL citus.enable_unsafe_triggers TO on`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `CREATE CONSTRAINT TRIGGER fail_commit_on_worker AFTER INSERT ON idempotency_keys
					DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_commit_on_worker()`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return
		}
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
