// Package cituscluster starts a Citus cluster on this machine, for tests and the bench: a
// coordinator and two workers, each a throwaway pgcluster of its own, and databases that span all
// three. It needs Citus installed for the Postgres that pgcluster finds; nothing here installs it.
//
// Citus keeps its metadata per database: a database is distributed only when it exists on every
// node, each with the citus extension, and its coordinator knows the workers. CreateDatabase does
// all of that, so a caller gets a database as empty as a plain one, on which `migrate up` lays
// the tables out for Citus (migrations.CitusUp).
package cituscluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
)

// ErrNotInstalled is returned by Start when the Postgres found has no Citus.
var ErrNotInstalled = errors.New("no citus.so: Citus is not installed for this Postgres; install Citus 13 for PostgreSQL 15 from Citus's own packages, as docs/scale-out.md says")

// Installed reports whether the Postgres that pgcluster would start has Citus: nil, or
// ErrNotInstalled.
func Installed() error {
	binDir, err := pgcluster.FindBinDir("")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(binDir, "..", "lib", "citus.so")); err != nil {
		return ErrNotInstalled
	}
	return nil
}

// Config says how to start the nodes.
type Config struct {
	// Settings are server settings applied to every node over Citus's own (see Start).
	Settings map[string]string

	// Logger returns the logger of node i (0 is the coordinator), which receives its server's log
	// at debug level as pgcluster.Config.Logger does. Nil discards every node's log.
	Logger func(i int) *slog.Logger
}

// Cluster is a coordinator and its workers.
type Cluster struct {
	Coordinator *pgcluster.Cluster
	Workers     []*pgcluster.Cluster

	// registering is held while the coordinator registers the nodes of one database: doing so
	// alters the postgres role on each worker, and two databases doing it at once fail there with
	// "tuple concurrently updated".
	registering sync.Mutex
}

// Nodes returns the coordinator and then the workers.
func (c *Cluster) Nodes() []*pgcluster.Cluster {
	return append([]*pgcluster.Cluster{c.Coordinator}, c.Workers...)
}

// Start starts a coordinator and two workers, each listening on a Unix socket of its own, and
// makes their postgres databases one Citus database, as CreateDatabase does a new one.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	settings := map[string]string{
		"shared_preload_libraries": "citus",
		"citus.node_conninfo":      "sslmode=disable",
		// Citus runs a maintenance daemon in each of its databases, and tests create many at once.
		"max_worker_processes": "128",
		// 32 shards a table is Citus's default, for spreading over many workers; 8 are plenty for
		// two, and creating a test's tables takes a quarter of the time.
		"citus.shard_count": "8",
	}
	maps.Copy(settings, cfg.Settings)
	c := &Cluster{}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
	}()
	for i := range 3 {
		logger := slog.New(slog.DiscardHandler)
		if cfg.Logger != nil {
			logger = cfg.Logger(i)
		}
		node, err := pgcluster.Start(ctx, pgcluster.Config{Settings: settings, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("error starting Citus node %d: %w", i, err)
		}
		if i == 0 {
			c.Coordinator = node
		} else {
			c.Workers = append(c.Workers, node)
		}
	}
	if err := c.setUp(ctx, "postgres"); err != nil {
		return nil, err
	}
	return c, nil
}

// CreateDatabase creates database name on every node and makes it one Citus database: the
// extension on each, and the coordinator told where it and the workers are.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	for _, node := range c.Nodes() {
		if err := exec(ctx, node.URL("postgres"), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("error creating database %s: %w", name, err)
		}
	}
	return c.setUp(ctx, name)
}

// setUp creates the extension in database name on every node and registers the nodes with the
// coordinator. A node is named by its socket directory, which libpq takes for a host name.
func (c *Cluster) setUp(ctx context.Context, name string) error {
	for _, node := range c.Nodes() {
		if err := exec(ctx, node.URL(name), "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("error creating the citus extension: %w", err)
		}
	}
	c.registering.Lock()
	defer c.registering.Unlock()
	coordinator := c.Coordinator.URL(name)
	host, port := c.Coordinator.SocketAddr()
	if err := exec(ctx, coordinator, "SELECT citus_set_coordinator_host($1, $2)", host, port); err != nil {
		return fmt.Errorf("error naming the coordinator: %w", err)
	}
	for _, w := range c.Workers {
		host, port := w.SocketAddr()
		if err := exec(ctx, coordinator, "SELECT citus_add_node($1, $2)", host, port); err != nil {
			return fmt.Errorf("error adding a worker: %w", err)
		}
	}
	return nil
}

// DropDatabase drops database name from every node, ending the sessions still on it.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	var errs []error
	for _, node := range c.Nodes() {
		if err := exec(ctx, node.URL("postgres"), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("error dropping database %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Stop stops every node that was started and removes its files.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	for _, node := range c.Nodes() {
		if node != nil {
			errs = append(errs, node.Stop(ctx))
		}
	}
	return errors.Join(errs...)
}

// exec runs one statement on a connection of its own.
func exec(ctx context.Context, url, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql, args...)
	return err
}
