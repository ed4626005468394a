package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
)

// connectionsHeadroom is what max_connections allows beyond the clients of a run: the bench's
// own connections, the API's between its pool and a readiness check, and Postgres's
// superuser_reserved_connections (3). Runs never overlap, so the clients count once.
const connectionsHeadroom = 20

// stopClusterTimeout bounds stopping the cluster, which may happen after a Ctrl-C.
const stopClusterTimeout = 30 * time.Second

// idleTimeout bounds the wait for a run's sessions to end, after which their statistics have
// been written: a backend reports its last counts as it exits.
const idleTimeout = 15 * time.Second

// benchCluster is the comparison's own Postgres cluster, durable unlike pgcluster's default,
// with a connection to its postgres database for the bookkeeping.
type benchCluster struct {
	binDir  string                     // of the server and of pgbench
	url     func(dbname string) string // of a database on it
	dataDir string
	stopped func(ctx context.Context) error // stops the server and removes its data
	admin   *pgx.Conn

	// cpu, with -compare, reads the processes' CPU time around each run; nil elsewhere.
	cpu *cpuMeter

	// statStatements is whether pg_stat_statements is loaded.
	statStatements bool

	// A Citus cluster's, which url, admin and dataDir name the coordinator of; unset on a
	// single server.
	//
	// createEmpty creates an empty database on every node in place of CREATE DATABASE, which
	// cannot copy one database into another either: a database's shards live on the workers.
	createEmpty func(ctx context.Context, dbname string) error
	// workers are the URLs of a database on each worker, which holds the data: each run
	// checkpoints and prewarms them as it does the coordinator.
	workers []func(dbname string) string
	// serverErrors are the errors the servers logged, for the message of a failed run.
	serverErrors func() string
}

// startDurableCluster starts a throwaway cluster that commits the way production does: every
// commit is flushed to disk before it is acknowledged, which is most of what a ride costs.
//
// With serverLog set, the server's own log goes there, every serialization failure and deadlock
// with its statement: the way to tell which statements conflict (grep for 40001).
func startDurableCluster(ctx context.Context, clients int, serverLog io.Writer) (*benchCluster, error) {
	binDir, err := pgcluster.FindBinDir("")
	if err != nil {
		return nil, err
	}
	settings := durableSettings(clients + connectionsHeadroom)
	c := &benchCluster{binDir: binDir, statStatements: hasStatStatements(binDir)}
	if c.statStatements {
		settings["shared_preload_libraries"] = "pg_stat_statements"
	}
	config := pgcluster.Config{BinDir: binDir, Settings: settings}
	if serverLog != nil {
		// The error's SQLSTATE and the failing statement, which is logged for errors already.
		settings["log_error_verbosity"] = "verbose"
		config.Logger = slog.New(slog.NewTextHandler(serverLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cluster, err := pgcluster.Start(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("error starting Postgres: %w", err)
	}
	c.url, c.dataDir, c.stopped = cluster.URL, cluster.DataDir(), cluster.Stop
	if err := c.connectAdmin(ctx); err != nil {
		return nil, errors.Join(err, c.stop(ctx))
	}
	return c, nil
}

// connectAdmin opens the bookkeeping connection to the postgres database of the server c.url
// names (a Citus cluster's coordinator), and creates pg_stat_statements there when it is loaded.
func (c *benchCluster) connectAdmin(ctx context.Context) (err error) {
	if c.admin, err = pgx.Connect(ctx, c.url("postgres")); err != nil {
		return fmt.Errorf("error connecting to Postgres: %w", err)
	}
	if c.statStatements {
		if _, err := c.admin.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
			return fmt.Errorf("error creating pg_stat_statements: %w", err)
		}
	}
	return nil
}

// durableSettings are the settings of a server that commits the way production does, and
// accepts maxConnections connections.
func durableSettings(maxConnections int) map[string]string {
	return map[string]string{
		"fsync":              "on",
		"synchronous_commit": "on",
		"full_page_writes":   "on",
		"max_connections":    strconv.Itoa(maxConnections),
	}
}

// stop closes the bookkeeping connection, stops the server and removes its data. It runs on
// the way out, after a Ctrl-C too, so it does not heed ctx's cancellation.
func (c *benchCluster) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopClusterTimeout)
	defer cancel()
	var err error
	if c.admin != nil {
		err = c.admin.Close(ctx)
	}
	return errors.Join(err, c.stopped(ctx))
}

// hasStatStatements reports whether the pg_stat_statements module is installed beside the
// server: it is in Postgres's contrib, which some installs leave out.
func hasStatStatements(binDir string) bool { return hasContrib(binDir, "pg_stat_statements") }

// hasContrib reports whether the server has the contrib module name.
func hasContrib(binDir, name string) bool {
	out, err := exec.Command(filepath.Join(binDir, "pg_config"), "--pkglibdir").Output()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(strings.TrimSpace(string(out)), name+".so"))
	return err == nil
}

// setting is a server setting as SHOW prints it.
type setting struct{ name, value string }

// reportedSettings are the settings that decide what a commit costs, and the server's size.
var reportedSettings = []string{
	"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
	"shared_buffers", "max_wal_size", "checkpoint_timeout", "max_connections", "shared_preload_libraries",
}

func (c *benchCluster) settings(ctx context.Context) ([]setting, error) {
	settings := make([]setting, len(reportedSettings))
	for i, name := range reportedSettings {
		settings[i].name = name
		if err := c.admin.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&settings[i].value); err != nil {
			return nil, fmt.Errorf("error reading setting %s: %w", name, err)
		}
	}
	return settings, nil
}

// fileSystem names the file system the data directory is on: a durable setting on tmpfs, say,
// would flush nothing anywhere.
func (c *benchCluster) fileSystem() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.dataDir, &st); err != nil {
		return "unknown file system"
	}
	names := map[int64]string{
		0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
		0x794C7630: "overlayfs", 0x2FC12FC1: "zfs",
	}
	if name, ok := names[int64(st.Type)]; ok {
		return name
	}
	return fmt.Sprintf("file system 0x%X", st.Type)
}

// xactCounters are a database's transaction counters in pg_stat_database.
type xactCounters struct{ commits, rollbacks int64 }

// startRun readies the cluster for a run on dbname and returns the counters to subtract
// afterwards. The checkpoint starts every run from the same state: the first change to each
// page after a checkpoint writes the whole page to the WAL.
func (c *benchCluster) startRun(ctx context.Context, dbname string) (xactCounters, error) {
	if err := c.prewarm(ctx, dbname); err != nil {
		return xactCounters{}, err
	}
	if err := c.checkpoint(ctx); err != nil {
		return xactCounters{}, err
	}
	if c.statStatements {
		if _, err := c.admin.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			return xactCounters{}, fmt.Errorf("error resetting pg_stat_statements: %w", err)
		}
	}
	return c.counters(ctx, dbname)
}

// checkpoint checkpoints the server, and a Citus cluster's workers too: CHECKPOINT on the
// coordinator is its own alone.
func (c *benchCluster) checkpoint(ctx context.Context) error {
	if _, err := c.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("error checkpointing: %w", err)
	}
	for i, worker := range c.workers {
		if err := withConn(ctx, worker("postgres"), func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "CHECKPOINT")
			return err
		}); err != nil {
			return fmt.Errorf("error checkpointing Citus worker %d: %w", i+1, err)
		}
	}
	return nil
}

// prewarm reads every table and index of dbname, so that each run starts with its own data in
// the operating system's cache. Three databases of 3,000,000 rides outgrow what a small machine
// caches, and without this whichever target ran last before another would leave it a cold
// cache, and the order of the runs, not the targets, would decide the figures. On a Citus
// cluster the data is the workers' shards, which are read on each worker.
func (c *benchCluster) prewarm(ctx context.Context, dbname string) error {
	if !hasContrib(c.binDir, "pg_prewarm") {
		return nil
	}
	// The coordinator creates the extension on its workers too, which refuse to do so themselves.
	if err := prewarmAt(ctx, c.url(dbname), true); err != nil {
		return fmt.Errorf("error prewarming %s: %w", dbname, err)
	}
	for i, worker := range c.workers {
		if err := prewarmAt(ctx, worker(dbname), false); err != nil {
			return fmt.Errorf("error prewarming %s on Citus worker %d: %w", dbname, i+1, err)
		}
	}
	return nil
}

// prewarmAt reads every table and index of the database at databaseURL, creating the pg_prewarm
// extension first if create is set.
func prewarmAt(ctx context.Context, databaseURL string, create bool) error {
	return withConn(ctx, databaseURL, func(conn *pgx.Conn) error {
		if create {
			if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_prewarm`); err != nil {
				return fmt.Errorf("error creating pg_prewarm: %w", err)
			}
		}
		// Citus hides a worker's shards from pg_class unless told otherwise; elsewhere the
		// setting is a placeholder that changes nothing.
		if _, err := conn.Exec(ctx, `SET citus.override_table_visibility = off`); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, `
			SELECT pg_prewarm(c.oid, 'read')
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')`)
		return err
	})
}

// endRun waits for the run's sessions on dbname to end, and records in m what they did.
func (c *benchCluster) endRun(ctx context.Context, dbname string, before xactCounters, m *measurement) error {
	if err := c.waitIdle(ctx, dbname); err != nil {
		return err
	}
	after, err := c.counters(ctx, dbname)
	if err != nil {
		return err
	}
	m.commits, m.rollbacks = after.commits-before.commits, after.rollbacks-before.rollbacks
	if !c.statStatements {
		return nil
	}
	// Transaction control is left out: pg_stat_statements sees BEGIN and COMMIT when they come
	// by the simple protocol, as pgx sends them, but not as pgbench's prepared statements, and
	// the commits are counted anyway.
	err = c.admin.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(calls), 0)
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 AND s.query !~* '^\s*(begin|commit|rollback|start transaction)\M'`,
		dbname).Scan(&m.statements, &m.calls)
	if err != nil {
		return fmt.Errorf("error reading pg_stat_statements: %w", err)
	}
	return nil
}

func (c *benchCluster) counters(ctx context.Context, dbname string) (xactCounters, error) {
	var x xactCounters
	err := c.admin.QueryRow(ctx, `
		SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, dbname).
		Scan(&x.commits, &x.rollbacks)
	if err != nil {
		return x, fmt.Errorf("error reading pg_stat_database: %w", err)
	}
	return x, nil
}

// waitIdle returns once no session is connected to dbname. A backend writes its statistics
// before it leaves pg_stat_activity, so the counters are complete from then on.
func (c *benchCluster) waitIdle(ctx context.Context, dbname string) error {
	deadline := time.Now().Add(idleTimeout)
	for {
		sessions, err := c.sessions(ctx, dbname)
		if err != nil {
			return err
		}
		if sessions == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sessions still on database %s %s after the run", sessions, dbname, idleTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sessions counts the clients' sessions on dbname. Background processes are left out, such as
// autovacuum's and, on a Citus coordinator, Citus's maintenance daemon, and so are the
// connections Citus opens from the coordinator to itself (application_name citus_internal …),
// which are not the clients' and need not end with them.
func (c *benchCluster) sessions(ctx context.Context, dbname string) (int64, error) {
	var n int64
	if err := c.admin.QueryRow(ctx, `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend' AND application_name NOT LIKE 'citus\_internal%'`,
		dbname).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting the sessions on %s: %w", dbname, err)
	}
	return n, nil
}
