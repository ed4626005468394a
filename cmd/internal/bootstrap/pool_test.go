package bootstrap

import (
	"context"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

// TestOpenPoolBoundsStatements checks the server-side bounds every process's connections get,
// and that DATABASE_URL can set its own.
func TestOpenPoolBoundsStatements(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	show := func(t *testing.T, databaseURL string) (statementTimeout, lockTimeout string) {
		t.Helper()
		pool, err := OpenPool(t.Context(), &Config{DatabaseURL: databaseURL}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if err := pool.QueryRow(t.Context(), "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')").
			Scan(&statementTimeout, &lockTimeout); err != nil {
			t.Fatal(err)
		}
		return statementTimeout, lockTimeout
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		if st, lt := show(t, url); st != "5s" || lt != "2s" {
			t.Fatalf("want statement_timeout 5s and lock_timeout 2s, got %s and %s", st, lt)
		}
	})
	t.Run("SetByDatabaseURL", func(t *testing.T) {
		t.Parallel()
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		if st, lt := show(t, url+sep+"statement_timeout=0&lock_timeout=250"); st != "0" || lt != "250ms" {
			t.Fatalf("want DATABASE_URL's statement_timeout 0 and lock_timeout 250ms, got %s and %s", st, lt)
		}
	})
}

// TestWaitForDatabase: a start that reaches the database and then loses it, as when Postgres
// restarts between the ping and the check of the migrations, waits for it like a start before
// it is up; the database's answer that it lacks migrations ends the wait at once.
func TestWaitForDatabase(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)

	t.Run("RetriesWhatFailsOnTheWay", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := waitForDatabase(t.Context(), logger, func(context.Context) error {
			calls++
			if calls < 3 {
				return fmt.Errorf("error checking migrations: %w", driver.ErrBadConn)
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("want success at the third check, got %v after %d", err, calls)
		}
	})

	t.Run("StopsAtTheSchemasAnswer", func(t *testing.T) {
		t.Parallel()
		calls := 0
		notMigrated := &schemaError{"database is not migrated"}
		err := waitForDatabase(t.Context(), logger, func(context.Context) error {
			calls++
			return notMigrated
		})
		if err != notMigrated || calls != 1 {
			t.Fatalf("want the schema's error at once, got %v after %d checks", err, calls)
		}
	})
}

// TestOpenPoolPassesAFrozenHost puts a host that accepts connections and never answers, as a
// primary whose machine froze does, first in a multi-host DATABASE_URL: the pool must give up on
// it and reach the database behind it.
func TestOpenPoolPassesAFrozenHost(t *testing.T) {
	t.Parallel()
	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	go func() {
		for {
			conn, err := frozen.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = frozen.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range held {
			_ = conn.Close()
		}
	})

	live, err := pgconn.ParseConfig(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("host=127.0.0.1,%s port=%d,%d dbname=%s user=%s sslmode=disable target_session_attrs=read-write",
		live.Host, frozen.Addr().(*net.TCPAddr).Port, live.Port, live.Database, live.User)
	pool, err := OpenPool(t.Context(), &Config{DatabaseURL: url}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("want the pool to pass the frozen host, got %v", err)
	}
	defer pool.Close()
	if err := pool.Ping(t.Context()); err != nil {
		t.Fatalf("want the database behind the frozen host, got %v", err)
	}
}
