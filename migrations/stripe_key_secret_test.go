package migrations_test

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
	"github.com/rocketrides/rocketrides/models"
)

// TestStripeKeySecret checks that every database migrated afresh draws a secret of its own, so
// that two databases never derive one Stripe key, while a copy of a database (a backup, a
// replica) carries its database's.
func TestStripeKeySecret(t *testing.T) {
	t.Parallel()

	secretOf := func(t *testing.T, url string) []byte {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		secret, err := models.StripeKeySecretGet(t.Context(), conn)
		if err != nil {
			t.Fatal(err)
		}
		if len(secret) != 32 {
			t.Fatalf("want a 32-byte secret, got %d bytes", len(secret))
		}
		return secret
	}

	first, second := dbtest.NewEmptyDB(t), dbtest.NewEmptyDB(t)
	for _, url := range []string{first, second} {
		if err := migrations.Up(t.Context(), url); err != nil {
			t.Fatalf("error migrating: %v", err)
		}
	}
	firstSecret := secretOf(t, first)
	if bytes.Equal(firstSecret, secretOf(t, second)) {
		t.Error("two databases migrated afresh drew the same secret")
	}
	if copied := secretOf(t, dbtest.CopyDB(t, first)); !bytes.Equal(copied, firstSecret) {
		t.Error("a copy of a database has another secret than the database")
	}
}
