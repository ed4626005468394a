package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/devenv/hacluster"
	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
)

// databaseName is the database dev creates in its cluster.
const databaseName = "rocketrides"

// A kept data directory holds the database in postgresSubdir and the Stripe stand-in's customers
// and charges in stripeJournalFile: the one names the other's customers, so they are kept, and
// thrown away, together.
const (
	postgresSubdir    = "postgres"
	haSubdir          = "ha"
	stripeJournalFile = "fakestripe.jsonl"
)

// stateDir is where dev keeps its state between runs, given with -data-dir or -persist; empty
// for a throwaway stack.
type stateDir string

// Postgres is the cluster's data directory, empty for a throwaway one.
func (d stateDir) Postgres() string {
	if d == "" {
		return ""
	}
	return filepath.Join(string(d), postgresSubdir)
}

// HA is the directory of the highly available formation, empty for a throwaway one.
func (d stateDir) HA() string {
	if d == "" {
		return ""
	}
	return filepath.Join(string(d), haSubdir)
}

// StripeJournal is the Stripe stand-in's journal, empty for one that keeps nothing.
func (d stateDir) StripeJournal() string {
	if d == "" {
		return ""
	}
	return filepath.Join(string(d), stripeJournalFile)
}

// check refuses a directory that an earlier dev used as the cluster itself, before it kept the
// stand-in's customers beside it: a cluster made inside that cluster would hide its riders.
func (d stateDir) check() error {
	if d == "" {
		return nil
	}
	_, err := os.Stat(filepath.Join(string(d), "PG_VERSION"))
	switch {
	case err == nil:
		return fmt.Errorf("%s holds a database as an earlier dev kept it, in the directory itself; dev now keeps it in %s, beside the Stripe stand-in's customers: move it there, or start afresh with another -data-dir",
			d, d.Postgres())
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("error reading the data directory: %w", err)
	}
}

func (d stateDir) String() string {
	if d == "" {
		return "a temporary directory, removed on exit"
	}
	return string(d)
}

// database is the running PostgreSQL of dev: one cluster, or a highly available formation.
type database struct {
	url        string
	monitorURL string // the pg_auto_failover monitor's, with -ha
	stop       func(ctx context.Context) error
}

// startDatabase starts the database in the state directory (a throwaway one if it is empty):
// one cluster on TCP port port of localhost if not zero, or with ha a formation whose monitor
// is on port port (free ports if zero), and creates database dbName if it does not exist yet.
func startDatabase(ctx context.Context, state stateDir, ha bool, port int, dbName string, logf func(string, ...any)) (*database, error) {
	if ha {
		return startFormation(ctx, state.HA(), port, dbName, logf)
	}
	cluster, url, err := startCluster(ctx, state.Postgres(), port, dbName, logf)
	if err != nil {
		return nil, err
	}
	return &database{url: url, stop: cluster.Stop}, nil
}

// startFormation starts a pg_auto_failover formation in dir, with the tuned failover timing
// that docs/high-availability.md measures.
func startFormation(ctx context.Context, dir string, port int, dbName string, logf func(string, ...any)) (*database, error) {
	logf("Starting PostgreSQL highly available: a pg_auto_failover monitor, a primary and its synchronous standby (data in %s)", stateDir(dir))
	if dir != "" {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
	}
	formation, err := hacluster.Start(ctx, hacluster.Config{Dir: dir, BasePort: port, Database: dbName, Tuned: true})
	if err != nil {
		return nil, err
	}
	return &database{url: formation.URL(), monitorURL: formation.MonitorURL(), stop: formation.Stop}, nil
}

// startCluster starts the cluster, in dir if set and in a throwaway directory if not, on TCP
// port port of localhost if not zero, and creates database dbName if it does not exist yet. It
// returns the database's URL.
func startCluster(ctx context.Context, dir string, port int, dbName string, logf func(string, ...any)) (*pgcluster.Cluster, string, error) {
	cfg := pgcluster.Config{Logger: slog.New(slog.DiscardHandler), Port: port}
	if dir != "" {
		cfg.DataDir = dir
		// A database that outlives the process gets durability back.
		cfg.Settings = map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
		if err := os.MkdirAll(filepath.Dir(cfg.DataDir), 0o755); err != nil {
			return nil, "", err
		}
	}
	logf("Starting PostgreSQL (data in %s)", stateDir(dir))
	cluster, err := pgcluster.Start(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	if err := cluster.CreateDatabase(ctx, dbName); err != nil {
		return nil, "", errors.Join(err, cluster.Stop(ctx))
	}
	return cluster, cluster.URL(dbName), nil
}

// dbOnlyTarget reads the database -db-only is to serve from databaseURL (DATABASE_URL; empty,
// the one .env gets from port): a Procfile manager's processes connect to the URL in .env, so
// -db-only listens where it says. It runs a database of its own on this machine, so the URL must
// name localhost and the cluster's user, postgres.
//
// With ha, the URL is the formation's multi-host one, and port is the monitor's, one below the
// first node's.
func dbOnlyTarget(databaseURL string, port int, ha bool) (listen int, dbName string, err error) {
	example := procfileDatabaseURL(port, ha)
	if databaseURL == "" {
		databaseURL = example
	}
	if ha {
		return haTarget(databaseURL, example)
	}
	u, err := url.Parse(databaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return 0, "", fmt.Errorf("DATABASE_URL %q is not a postgres:// URL", databaseURL)
	}
	if host := u.Hostname(); host != "localhost" && host != "127.0.0.1" {
		return 0, "", fmt.Errorf("DATABASE_URL names host %q: -db-only runs a database on this machine, so it must name localhost, as in %s", host, example)
	}
	if user := u.User.Username(); user != "postgres" {
		return 0, "", fmt.Errorf("DATABASE_URL names user %q: -db-only's database has the one user postgres, as in %s", user, example)
	}
	listen = 5432 // libpq's default, for a URL that names none
	if p := u.Port(); p != "" {
		if listen, err = strconv.Atoi(p); err != nil || listen < 1 || listen > 65535 {
			return 0, "", fmt.Errorf("DATABASE_URL names port %q, not a port number", p)
		}
	}
	dbName = strings.TrimPrefix(u.Path, "/")
	if dbName == "" {
		return 0, "", fmt.Errorf("DATABASE_URL names no database: end it with /%s, as in %s", databaseName, example)
	}
	return listen, dbName, nil
}

// haTarget reads the monitor's port and the database's name from a formation's URL.
func haTarget(databaseURL, example string) (port int, dbName string, err error) {
	config, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return 0, "", fmt.Errorf("DATABASE_URL is not a postgres:// URL: %w", err)
	}
	if len(config.Fallbacks) != 1 || config.Fallbacks[0].Port != config.Port+1 {
		return 0, "", fmt.Errorf("DATABASE_URL must name the formation's two nodes on consecutive ports, as in %s", example)
	}
	return int(config.Port) - 1, config.Database, nil
}
