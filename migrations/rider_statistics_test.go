package migrations_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
)

// TestRiderStatistics: a statement that names a rider and a row of theirs is planned on the
// table's key, even for a rider whom the table's statistics have not seen. With an MCV list
// long enough to hold every rider (a young table, or a Citus shard of a few riders), such a rider
// looks like no rows at all, and every index that leads with user_id looks as cheap as the key:
// the planner then took the one with fewer conditions, and read all of the rider's rows for one,
// taking predicate locks over all of them (docs/scale-out.md). Migration 00014 has the planner
// judge every rider by the average instead.
func TestRiderStatistics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// 40 riders of 400 rides each, all of whom the statistics hold (on Citus, a few riders a
	// shard), then a rider they do not.
	if _, err := conn.Exec(ctx, `
		INSERT INTO users (email, stripe_customer_id, api_token_hash)
		SELECT 'rider' || i || '@rocketrides.example', 'cus_' || i, sha256(convert_to('token' || i, 'UTF8'))
		FROM generate_series(1, 41) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO idempotency_keys (id, idempotency_key, request_method, request_params, request_path,
			origin_ip, recovery_point, stripe_idempotency_key, user_id)
		SELECT u.id * 100000 + i, lpad('key-' || u.id || '-' || i, 24, '0'), 'POST', '{}', '/rides',
			'127.0.0.1', 'started', lpad('stripe-' || u.id || '-' || i, 24, '0'), u.id
		FROM users u, generate_series(1, 400) i WHERE u.email <> 'rider41@rocketrides.example'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO rides (id, idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon,
			stripe_charge_id, user_id)
		SELECT id, id, 37.7, -122.4, 37.3, -121.9, 'ch_' || id, user_id FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE users, idempotency_keys, rides`); err != nil {
		t.Fatal(err)
	}
	var unseen int64
	if err := conn.QueryRow(ctx, `SELECT id FROM users WHERE email = 'rider41@rocketrides.example'`).Scan(&unseen); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ statement, key string }{
		{`UPDATE rides SET stripe_charge_id = 'ch_x' WHERE user_id = %d AND id = 1`, "rides_pkey"},
		{`UPDATE idempotency_keys SET locked_at = now() WHERE user_id = %d AND id = 1`, "idempotency_keys_pkey"},
	} {
		statement := fmt.Sprintf(c.statement, unseen)
		rows, _ := conn.Query(ctx, "EXPLAIN "+statement)
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		// On Citus, the plan of the shard's statement, its index named for the shard (…_102008).
		onKey := regexp.MustCompile(`Index Scan using ` + c.key + `(_\d+)? on `)
		if text := strings.Join(plan, "\n"); !onKey.MatchString(text) || !strings.Contains(text, "(user_id = ") || !strings.Contains(text, "AND (id = ") {
			t.Errorf("want %s planned on both columns of %s, got:\n%s", statement, c.key, text)
		}
	}
}

// TestCitusUpgrade: a Citus database laid out at migration 00012, as a live cluster is, migrated
// up: 00013's column and CHECK reach every shard of rides, and 00014 gives every shard of the
// rider tables the statistics target of 1, which Citus refuses to propagate.
func TestCitusUpgrade(t *testing.T) {
	t.Parallel()
	if !dbtest.OnCitus() {
		t.Skip("about the shards of a Citus database: runs under TEST_CITUS=1")
	}
	ctx := t.Context()
	url := dbtest.NewEmptyDB(t)
	db, err := migrations.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.RiverUp(ctx, db); err != nil {
		t.Fatal(err)
	}
	if laidOut, err := migrations.CitusUp(ctx, db); err != nil || len(laidOut) == 0 {
		t.Fatalf("want the tables laid out for Citus at 00012, got %v, %v", laidOut, err)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}

	for _, table := range []string{"idempotency_keys", "rides", "audit_records", "abandoned_requests", "staged_jobs"} {
		var targets []string
		rows, err := db.QueryContext(ctx, `SELECT DISTINCT result FROM run_command_on_shards($1,
			$$SELECT attstattarget FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'user_id'$$)`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var target string
			if err := rows.Scan(&target); err != nil {
				t.Fatal(err)
			}
			targets = append(targets, target)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if len(targets) != 1 || targets[0] != "1" {
			t.Errorf("want every shard of %s at the statistics target 1, got %v", table, targets)
		}
	}
	var failed int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM run_command_on_shards('rides',
		$$SELECT count(stripe_refund_amount) FROM %s$$) WHERE NOT success`).Scan(&failed); err != nil || failed != 0 {
		t.Errorf("want rides.stripe_refund_amount on every shard, got %d shards without, %v", failed, err)
	}
}
