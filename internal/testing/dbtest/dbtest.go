// Package dbtest gives each test a database of its own, migrated and empty, on a real Postgres.
//
// A test binary gets one server: the one TEST_DATABASE_URL names, or else a throwaway cluster
// started from the installed PostgreSQL binaries (see pgcluster). On it, a template database is
// migrated once, and every test clones it, which takes milliseconds where migrating would take
// far longer. Each package that uses it calls Main from TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// Under TEST_CITUS=1 the server is a Citus cluster instead, a coordinator and two workers (see
// cituscluster), and each test's database is created on all three and migrated, which lays its
// tables out for Citus; a run asking for Citus where it is not installed fails, saying so.
//
// The server is started by the first test that asks for a database, so a run whose tests need
// none starts none.
package dbtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
	"github.com/rocketrides/rocketrides/models"
)

// The one server of this test binary, started on first use.
var (
	mainCalled atomic.Bool
	setupOnce  sync.Once
	shared     *server
	setupErr   error
)

// setupTimeout bounds starting the server and migrating the template: a second or two on a
// developer's machine, more on a loaded CI machine running several test binaries at once.
const setupTimeout = 2 * time.Minute

// Main runs the tests of a package, at least MinParallel at once, and then stops the server
// they used (or, on a server named by TEST_DATABASE_URL, drops the template), and exits. Call it
// from TestMain.
func Main(m *testing.M) {
	mainCalled.Store(true)
	raiseParallel()
	code := m.Run()
	if shared != nil {
		if err := shared.close(); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// OnCitus reports whether this run asked for Citus (TEST_CITUS), for a test that must start a
// server of its own of the same kind, or that can only run on plain Postgres.
func OnCitus() bool {
	return os.Getenv("TEST_CITUS") != ""
}

// NewDB creates a database for this test, cloned from the migrated template, and returns its
// URL. The database is dropped when the test ends, after the cleanups registered later (such as
// closing pools on it) have run. It is safe to call from parallel tests.
func NewDB(t testing.TB) string {
	t.Helper()
	s := getServer(t)
	return s.createDB(t, s.template)
}

// NewEmptyDB creates a database for this test with no schema at all, for tests of the
// migrations themselves, and returns its URL. It is dropped when the test ends.
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	// template0 is Postgres's pristine template, to which nobody can connect.
	return getServer(t).createDB(t, "template0")
}

// CopyDB copies the database at url, as it stands now, into a new database that is dropped when
// the test ends, and returns the copy's URL: a backup taken at this moment, for tests of what a
// restore keeps. Nobody may be connected to the original while it is copied (Postgres refuses to
// clone a database in use); close or reset the test's pools on it first.
func CopyDB(t testing.TB, url string) string {
	t.Helper()
	s := getServer(t)
	if s.citus != nil {
		t.Skip("dbtest: a backup of a Citus database is one of every node; this restore test runs on plain Postgres")
	}
	config, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatalf("dbtest: error parsing %s: %v", url, err)
	}
	return s.createDB(t, config.Database)
}

// NewPool creates a database for this test as NewDB does, and returns a pool on it that is
// closed when the test ends, its connections set up as the service's are
// (models.RecordSerializationWarnings).
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := NewDB(t)
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("dbtest: error parsing %s: %v", url, err)
	}
	config.ConnConfig.OnNotice = models.RecordSerializationWarnings
	pool, err := pgxpool.NewWithConfig(t.Context(), config)
	if err != nil {
		t.Fatalf("dbtest: error opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Cluster returns the throwaway cluster the tests run on, for tests that stop and restart the
// server; nil when TEST_DATABASE_URL names the server, which tests cannot stop. A test that
// stops the server must not run in parallel with other database tests of its package, and must
// start it again before it ends.
func Cluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	return getServer(t).cluster
}

// getServer returns the server of this test binary, starting it on first use. Should it fail
// to start, every test that needs it fails with the reason: a missing Postgres must not pass
// for a green run.
func getServer(t testing.TB) *server {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("dbtest: call dbtest.Main(m) from TestMain, so that the server is stopped when the tests end")
	}
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		shared, setupErr = startServer(ctx)
	})
	if setupErr != nil {
		t.Fatalf("dbtest: %v", setupErr)
	}
	return shared
}
