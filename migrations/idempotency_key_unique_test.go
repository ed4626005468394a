package migrations_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

// TestOneKeyPerRiderAndClientKey: the schema itself refuses a second row for one rider's client
// key. Under SERIALIZABLE, two first requests racing usually learn of each other through the
// predicate locks of their lookups, so the request path alone would not notice if this index
// were missing; everything else that writes keys (an operator, a later code path, a
// transaction at another isolation level) would then make duplicates.
func TestOneKeyPerRiderAndClientKey(t *testing.T) {
	t.Parallel()
	conn, err := pgx.Connect(t.Context(), dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())

	var userID int64
	if err := conn.QueryRow(t.Context(), `
		INSERT INTO users (email, stripe_customer_id, api_token_hash)
		VALUES ('unique@rocketrides.example', 'cus_unique', sha256('token'))
		RETURNING id`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	insert := func(stripeKey string) error {
		_, err := conn.Exec(t.Context(), `
			INSERT INTO idempotency_keys (idempotency_key, request_method, request_params, request_path,
				origin_ip, recovery_point, stripe_idempotency_key, user_id)
			VALUES ('the-same-client-key-0001', 'POST', '{}', '/rides', '127.0.0.1', 'started', $1, $2)`,
			stripeKey, userID)
		return err
	}
	if err := insert("stripe-key-of-the-first-0001"); err != nil {
		t.Fatal(err)
	}
	var pgErr *pgconn.PgError
	// On Citus the worker refuses it, and the coordinator passes the error on without the
	// constraint's name, its message naming the index of the rider's shard (…_102014); the
	// detail names the key's columns either way.
	const index = "idempotency_keys_user_id_idempotency_key"
	if err := insert("stripe-key-of-the-second-001"); !errors.As(err, &pgErr) || pgErr.Code != "23505" ||
		!strings.Contains(pgErr.Message, index) || !strings.HasPrefix(pgErr.Detail, "Key (user_id, idempotency_key)=") {
		t.Fatalf("want the second key refused by %s, got %v (constraint %q, detail %q)", index, err, pgErr.ConstraintName, pgErr.Detail)
	}
	if !dbtest.OnCitus() && pgErr.ConstraintName != index {
		t.Fatalf("want the refusal to name %s, got %q", index, pgErr.ConstraintName)
	}
}
