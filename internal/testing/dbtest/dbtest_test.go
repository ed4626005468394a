package dbtest_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

func TestNewPool(t *testing.T) {
	t.Parallel()

	t.Run("DatabaseIsMigrated", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		for _, table := range []string{"users", "idempotency_keys", "rides", "river_job"} {
			if n := count(t, pool, table); n != 0 {
				t.Errorf("%s holds %d rows in a fresh database, want 0", table, n)
			}
		}
	})

	t.Run("DatabasesAreIsolated", func(t *testing.T) {
		t.Parallel()
		first, second := dbtest.NewPool(t), dbtest.NewPool(t)
		insertUser(t, first, "rider@example.com")
		if n := count(t, first, "users"); n != 1 {
			t.Errorf("first database holds %d users, want 1", n)
		}
		if n := count(t, second, "users"); n != 0 {
			t.Errorf("second database holds %d users, want 0: it sees the first one's rows", n)
		}
	})

	t.Run("ManyInParallel", func(t *testing.T) {
		t.Parallel()
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				pool := dbtest.NewPool(t)
				insertUser(t, pool, fmt.Sprintf("rider%d@example.com", i))
				if n := count(t, pool, "users"); n != 1 {
					t.Errorf("database holds %d users, want 1", n)
				}
			})
		}
	})
}

func TestNewEmptyDB(t *testing.T) {
	t.Parallel()

	conn, err := pgx.Connect(t.Context(), dbtest.NewEmptyDB(t))
	if err != nil {
		t.Fatalf("error connecting: %v", err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatalf("error counting tables: %v", err)
	}
	if tables != 0 {
		t.Errorf("empty database holds %d tables, want 0", tables)
	}
}

func TestDatabaseIsDroppedWhenTestEnds(t *testing.T) {
	t.Parallel()

	var url string
	t.Run("Test", func(t *testing.T) {
		url = dbtest.NewDB(t)
		// A connection left open must not stop the drop.
		pool, err := pgxpool.New(t.Context(), url)
		if err != nil {
			t.Fatalf("error opening pool: %v", err)
		}
		if err := pool.Ping(t.Context()); err != nil {
			t.Fatalf("error connecting: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, url); err == nil {
		conn.Close(ctx)
		t.Errorf("database %s still exists after its test ended", url)
	}
}

// Not parallel: stopping the server would fail the other tests.
func TestClusterRestartKeepsData(t *testing.T) {
	cluster := dbtest.Cluster(t)
	if cluster == nil {
		t.Skip("TEST_DATABASE_URL names the server, which tests cannot restart")
	}
	url := dbtest.NewDB(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("error connecting: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(),
		"INSERT INTO users (email, stripe_customer_id, api_token_hash) VALUES ('kept@example.com', 'cus_123', sha256('x'))"); err != nil {
		t.Fatalf("error inserting user: %v", err)
	}

	if err := cluster.Restart(t.Context()); err != nil {
		t.Fatalf("error restarting: %v", err)
	}

	// The old connection died with the server; the URL still leads to the same data.
	again, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("error connecting after restart: %v", err)
	}
	defer again.Close(context.Background())
	var email string
	if err := again.QueryRow(t.Context(), "SELECT email FROM users").Scan(&email); err != nil {
		t.Fatalf("error reading after restart: %v", err)
	}
	if email != "kept@example.com" {
		t.Errorf("email = %q after restart, want kept@example.com", email)
	}
}

func insertUser(t *testing.T, pool *pgxpool.Pool, email string) {
	t.Helper()
	tokenHash := sha256.Sum256([]byte(email))
	_, err := pool.Exec(t.Context(),
		"INSERT INTO users (email, stripe_customer_id, api_token_hash) VALUES ($1, 'cus_123', $2)", email, tokenHash[:])
	if err != nil {
		t.Fatalf("error inserting user: %v", err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		t.Fatalf("error counting %s: %v", table, err)
	}
	return n
}
