package dbtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/devenv/cituscluster"
	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
	"github.com/rocketrides/rocketrides/migrations"
)

// server is the Postgres server of a test binary, holding its migrated template.
type server struct {
	cluster  *pgcluster.Cluster    // nil on a server named by TEST_DATABASE_URL
	citus    *cituscluster.Cluster // non-nil under TEST_CITUS, cluster being its coordinator
	adminURL string                // a database to connect to for CREATE and DROP DATABASE
	urlFor   func(dbname string) string
	template string
	prefix   string // of the names of per-test databases
	dbCount  atomic.Int64
}

// dropTimeout bounds dropping a test's database when the test ends.
const dropTimeout = 30 * time.Second

// startServer starts the server of this test binary and migrates its template.
func startServer(ctx context.Context) (*server, error) {
	if databaseURL := os.Getenv("TEST_DATABASE_URL"); databaseURL != "" {
		if OnCitus() {
			return nil, errors.New("TEST_DATABASE_URL and TEST_CITUS exclude each other: TEST_CITUS starts a Citus cluster of its own")
		}
		return startExternal(ctx, databaseURL)
	}
	if OnCitus() {
		return startCitus(ctx)
	}

	cluster, err := pgcluster.Start(ctx, pgcluster.Config{})
	if errors.Is(err, pgcluster.ErrNotInstalled) {
		return nil, fmt.Errorf("%w, or set TEST_DATABASE_URL to a server the tests may use", err)
	}
	if err != nil {
		return nil, fmt.Errorf("error starting Postgres for the tests: %w", err)
	}
	s := &server{
		cluster:  cluster,
		adminURL: cluster.URL("postgres"),
		urlFor:   cluster.URL,
		template: "rocketrides_template",
		prefix:   "test",
	}
	if err := s.createTemplate(ctx); err != nil {
		return nil, errors.Join(err, cluster.Stop(ctx))
	}
	return s, nil
}

// startCitus starts a Citus cluster, a coordinator and two workers. A database on it spans the
// three nodes, so it cannot be cloned from a template: each test's is created and migrated anew,
// which lays its tables out for Citus.
func startCitus(ctx context.Context) (*server, error) {
	c, err := cituscluster.Start(ctx, cituscluster.Config{})
	if err != nil {
		return nil, fmt.Errorf("TEST_CITUS asks for a Citus cluster: %w", err)
	}
	return &server{
		cluster:  c.Coordinator,
		citus:    c,
		adminURL: c.Coordinator.URL("postgres"),
		urlFor:   c.Coordinator.URL,
		template: "rocketrides_template", // never created: a name for createDB to tell migrated from empty
		prefix:   "test",
	}, nil
}

// startExternal uses the server at databaseURL. Test binaries of several packages share it at
// once, so the names of their databases carry the process id.
func startExternal(ctx context.Context, databaseURL string) (*server, error) {
	u, err := url.Parse(databaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("TEST_DATABASE_URL must be a postgres:// URL")
	}
	s := &server{
		adminURL: databaseURL,
		urlFor: func(dbname string) string {
			other := *u
			other.Path, other.RawPath = "/"+dbname, ""
			return other.String()
		},
		template: fmt.Sprintf("rocketrides_template_%d", os.Getpid()),
		prefix:   fmt.Sprintf("test_%d", os.Getpid()),
	}
	if err := s.createTemplate(ctx); err != nil {
		return nil, fmt.Errorf("error preparing the server TEST_DATABASE_URL names: %w", err)
	}
	return s, nil
}

// createTemplate creates the template database afresh and migrates it. Connections to it are
// then refused: Postgres refuses to clone a database anyone is connected to ("source database
// is being accessed by other users"), whereas clones alone may run side by side.
func (s *server) createTemplate(ctx context.Context) error {
	template := pgx.Identifier{s.template}.Sanitize()
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+template+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("error dropping old template database: %w", err)
	}
	if err := s.exec(ctx, "CREATE DATABASE "+template); err != nil {
		return fmt.Errorf("error creating template database: %w", err)
	}
	if err := migrations.Up(ctx, s.urlFor(s.template)); err != nil {
		return fmt.Errorf("error migrating template database: %w", err)
	}
	if err := s.exec(ctx, "ALTER DATABASE "+template+" ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("error closing template database to connections: %w", err)
	}
	return nil
}

// createDB clones template into a database that is dropped when t ends, and returns its URL.
func (s *server) createDB(t testing.TB, template string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", s.prefix, s.dbCount.Add(1))
	ident := pgx.Identifier{name}.Sanitize()
	if s.citus != nil {
		return s.createCitusDB(t, name, template == s.template)
	}

	if err := s.exec(t.Context(), "CREATE DATABASE "+ident+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
		t.Fatalf("dbtest: error creating database %s: %v", name, err)
	}

	t.Cleanup(func() {
		// Not t.Context(): it is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		// FORCE ends the sessions of pools a test forgot to close.
		if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: error dropping database %s: %v", name, err)
		}
	})
	return s.urlFor(name)
}

// createCitusDB creates database name on every node of the Citus cluster, migrated when migrate
// is set, and drops it when t ends.
func (s *server) createCitusDB(t testing.TB, name string, migrate bool) string {
	t.Helper()
	// Registered first, so that a database created on some nodes only is dropped too.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if err := s.citus.DropDatabase(ctx, name); err != nil {
			t.Errorf("dbtest: %v", err)
		}
	})
	if err := s.citus.CreateDatabase(t.Context(), name); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if migrate {
		if err := migrations.Up(t.Context(), s.urlFor(name)); err != nil {
			t.Fatalf("dbtest: error migrating database %s: %v", name, err)
		}
	}
	return s.urlFor(name)
}

// exec runs one statement on a connection of its own. No pool: a test may restart the server,
// which would leave a pool holding dead connections.
func (s *server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("error connecting to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// close stops the cluster, or drops the template from a server named by TEST_DATABASE_URL.
func (s *server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	if s.citus != nil {
		if err := s.citus.Stop(ctx); err != nil {
			return fmt.Errorf("error stopping Citus: %w", err)
		}
		return nil
	}
	if s.cluster != nil {
		if err := s.cluster.Stop(ctx); err != nil {
			return fmt.Errorf("error stopping Postgres: %w", err)
		}
		return nil
	}
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.template}.Sanitize()); err != nil {
		return fmt.Errorf("error dropping template database: %w", err)
	}
	return nil
}
