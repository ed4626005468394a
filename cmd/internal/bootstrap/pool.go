package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rocketrides/rocketrides/internal/telemetry"
	"github.com/rocketrides/rocketrides/migrations"
	"github.com/rocketrides/rocketrides/models"
)

// connectWait is how long a starting process waits for its database. A Procfile starts every
// process at once, often before the database accepts connections; past this, something is
// wrong and a clear failure beats waiting forever.
const connectWait = 10 * time.Second

// PoolMaxConnsDefault is the size of a process's database pool when DATABASE_URL sets no
// pool_max_conns. pgxpool's own default, the larger of 4 and the number of CPUs, starves a busy
// API: its requests queue for a connection while the connections' transactions wait on their
// commits' fsyncs and use no CPU. Measured with `go run ./lab/bench -compare` (32 clients, 300,000
// rides of history, 2 cores): 4 connections gave 490 rides/s at p99 344 ms, 8 gave 810 at
// 65 ms, 16 gave 990 at 64 ms. A pool only opens the connections it uses, so the quieter
// processes hold far fewer; Postgres's max_connections must still allow 16 per process.
const PoolMaxConnsDefault = 16

// Server-side bounds on every statement of every process, unless DATABASE_URL sets its own
// (statement_timeout=..., lock_timeout=... as URL parameters). A statement of ours takes
// milliseconds; one that runs for seconds is stuck, and without a bound it would hold its
// connection, and a rider, for as long as the client waits. A lock wait is bounded tighter: the
// locks a request takes are held for one short transaction, so a long wait means something holds
// a lock it should not (an operator's LOCK TABLE, a migration), and a quick 503 with Retry-After
// serves the rider better. The statement's error maps to models.IsUnavailable.
const (
	StatementTimeoutDefault = 5 * time.Second
	LockTimeoutDefault      = 2 * time.Second
)

// ConnectTimeoutDefault bounds connecting to one host of DATABASE_URL, unless it sets its own
// connect_timeout. A multi-host DATABASE_URL (a primary and its standby, with
// target_session_attrs=read-write) has pgx try the hosts in turn; a primary whose machine froze
// neither accepts nor refuses, and without a bound every new connection would wait on it for
// the kernel's connect timeout, minutes, before trying the standby that took over.
const ConnectTimeoutDefault = 2 * time.Second

// TCP keepalive on every connection. A connection to a machine that froze or fell off the
// network gets no reset, so one that only waits (a LISTEN) would wait forever; with probes after
// 5 s of silence, three of them 2 s apart, the kernel gives up on it within about 11 s.
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
)

// pingTimeout bounds a starting process's check that the database answers: room to try two
// hosts for ConnectTimeoutDefault each.
const pingTimeout = 2*ConnectTimeoutDefault + time.Second

// OpenPool connects to the configured database, waiting up to connectWait for it to come up,
// and checks that it is migrated.
func OpenPool(ctx context.Context, cfg *Config, logger *slog.Logger) (*pgxpool.Pool, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	poolConfig, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		poolConfig.MaxConns = PoolMaxConnsDefault
	}
	poolConfig.MaxConns = max(poolConfig.MaxConns, cfg.PoolMaxConnsAtLeast)
	params := poolConfig.ConnConfig.RuntimeParams
	if _, ok := params["statement_timeout"]; !ok {
		params["statement_timeout"] = strconv.FormatInt(StatementTimeoutDefault.Milliseconds(), 10)
	}
	if _, ok := params["lock_timeout"]; !ok {
		params["lock_timeout"] = strconv.FormatInt(LockTimeoutDefault.Milliseconds(), 10)
	}
	conn := poolConfig.ConnConfig
	if !strings.Contains(cfg.DatabaseURL, "connect_timeout") {
		conn.ConnectTimeout = ConnectTimeoutDefault
	}
	dialer := &net.Dialer{
		Timeout: conn.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
	}
	conn.DialFunc = dialer.DialContext
	if tracer := telemetry.PgxTracer(); tracer != nil {
		conn.Tracer = tracer
	}
	// Citus reports a serialization failure found at COMMIT in a WARNING before the error.
	conn.OnNotice = models.RecordSerializationWarnings
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, fmt.Errorf("error creating database pool: %w", err)
	}

	err = waitForDatabase(ctx, logger, func(ctx context.Context) error {
		pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		if err := pool.Ping(pingCtx); err != nil {
			return err
		}
		if cfg.SchemaAsIs {
			return nil
		}
		checkCtx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		return checkMigrated(checkCtx, conn)
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// waitForDatabase runs check until it passes, for up to connectWait, and returns its last error
// otherwise. Only a schemaError, the database's definite answer that it lacks migrations, ends
// the wait at once. Any other error may be the database not up yet, or restarting: a check that
// reached the database and then lost it (a restart between the ping and the migrations'
// query) is tried again like a ping that failed, or the process would exit while the database
// is back within a second.
func waitForDatabase(ctx context.Context, logger *slog.Logger, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(connectWait)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // stopped while waiting: not the database's fault
		}
		if _, ok := errors.AsType[*schemaError](err); ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("database not reachable after %s (is Postgres running, and DATABASE_URL right?): %w", connectWait, err)
		}
		logger.WarnContext(ctx, "Bootstrap: database not reachable yet, retrying", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// schemaError is the database's answer that its schema is not the one this build needs: waiting
// will not change it.
type schemaError struct{ msg string }

func (e *schemaError) Error() string { return e.msg }

// checkMigrated fails when the database lacks migrations this build knows of: a process
// running against an older schema would fail later, on some request, in a less obvious way.
// It connects as the pool does, connect timeout and dialer included.
func checkMigrated(ctx context.Context, conn *pgx.ConnConfig) error {
	db := stdlib.OpenDB(*conn)
	defer db.Close()
	provider, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	pending, err := provider.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("error checking migrations: %w", err)
	}
	if !pending {
		return nil
	}
	// Named, so that an operator sees what is missing: River's schema, say (00002_river_schema.go).
	// GetVersions, like HasPending, takes no lock, so that a migration running elsewhere does not
	// hold up this report.
	current, _, err := provider.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("error checking migrations: %w", err)
	}
	var names []string
	for _, source := range provider.ListSources() {
		if source.Version > current {
			names = append(names, filepath.Base(source.Path))
		}
	}
	return &schemaError{fmt.Sprintf("database is not migrated (pending: %s): run `go run ./cmd/migrate up` with the same DATABASE_URL",
		strings.Join(names, ", "))}
}
