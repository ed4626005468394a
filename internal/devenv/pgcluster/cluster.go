// Package pgcluster runs a PostgreSQL server of its own from the binaries installed on the
// machine, so that tests and local development need no database set up by hand: the tests get a
// throwaway cluster in a temporary directory, a developer a persistent one in the project.
package pgcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Cluster is a PostgreSQL cluster (a data directory and a server running on it) owned by this
// process. Its server can be stopped and started again on the same data and the same URL, for
// tests of what happens while the database is down.
type Cluster struct {
	binDir       string
	dataDir      string
	runDir       string // the socket, and the data when it is temporary; removed by Stop
	port         int
	settings     map[string]string
	startTimeout time.Duration
	owner        owner
	logger       *slog.Logger
	log          *serverLog

	mu     sync.Mutex
	server *server // nil while stopped
}

// Start initialises the cluster (unless cfg.DataDir already holds one) and starts its server,
// returning once the server accepts connections.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	binDir, err := FindBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	owner, err := lookupOwner()
	if err != nil {
		return nil, err
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	runDir, err := makeRunDir(owner)
	if err != nil {
		return nil, err
	}
	removeStaleRunDirs(filepath.Dir(runDir), logger)

	settings := defaultSettings()
	maps.Copy(settings, cfg.Settings)
	c := &Cluster{
		binDir:       binDir,
		dataDir:      cmp.Or(cfg.DataDir, filepath.Join(runDir, "data")),
		runDir:       runDir,
		port:         cfg.Port,
		settings:     settings,
		startTimeout: cmp.Or(cfg.StartTimeout, defaultStartTimeout),
		owner:        owner,
		logger:       logger,
		log:          &serverLog{logger: logger},
	}
	if err := c.initDB(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(runDir))
	}
	if err := c.StartServer(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(runDir))
	}
	return c, nil
}

// makeRunDir makes the directory for the server's socket. It is short on purpose: a Unix socket
// path must fit in 107 bytes, which a deep TMPDIR can exceed.
func makeRunDir(owner owner) (string, error) {
	dir, err := os.MkdirTemp("", runDirPattern)
	if err != nil || len(dir) > 80 {
		if err == nil {
			_ = os.Remove(dir)
		}
		dir, err = os.MkdirTemp("/tmp", runDirPattern)
	}
	if err != nil {
		return "", fmt.Errorf("error creating the directory for Postgres's socket: %w", err)
	}
	if err := owner.chown(dir); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

// initDB creates the cluster, unless the data directory already holds one.
func (c *Cluster) initDB(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		c.logger.InfoContext(ctx, "Postgres: using existing cluster", slog.String("data_dir", c.dataDir))
		return nil
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return fmt.Errorf("error creating Postgres data directory: %w", err)
	}
	if err := c.owner.chown(c.dataDir); err != nil {
		return err
	}

	start := time.Now()
	args := []string{
		"--username", "postgres",
		"--auth", "trust",
		"--encoding", "UTF8",
		"--no-locale", // The C locale: the same sorting everywhere, whatever the machine's.
		"--no-sync",
	}
	cached := c.pristineCachePath(args)
	if cached != "" {
		if err := copyTree(cached, c.dataDir, c.owner); err == nil {
			c.logger.InfoContext(ctx, "Postgres: copied a pristine cluster",
				slog.String("data_dir", c.dataDir), slog.String("from", cached), slog.Duration("duration", time.Since(start)))
			return nil
		}
		// Absent (the first run), or unusable: initdb makes the cluster, on an empty directory.
		if err := emptyDir(c.dataDir); err != nil {
			return err
		}
	}

	cmd := c.command(ctx, "initdb", append([]string{"--pgdata", c.dataDir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("error running initdb: %w\n%s", err, out)
	}
	c.logger.InfoContext(ctx, "Postgres: initialised cluster",
		slog.String("data_dir", c.dataDir), slog.Duration("duration", time.Since(start)))
	if cached != "" {
		savePristine(c.dataDir, cached) // before the server first touches it
	}
	return nil
}

// command builds a command for one of the server binaries, running as the cluster's owner.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	// The owner may not be able to enter our working directory (/root); it owns runDir.
	cmd.Dir = c.runDir
	cmd.SysProcAttr = c.owner.sysProcAttr()
	return cmd
}

// Stop stops the server and removes the directories Start created, the data included when it
// was temporary.
func (c *Cluster) Stop(ctx context.Context) error {
	err := c.StopServer(ctx)
	if rmErr := os.RemoveAll(c.runDir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("error removing Postgres's directory: %w", rmErr))
	}
	return err
}

// URL returns the URL of database dbname on the cluster, in the postgres:// form that pgx, psql
// and libpq-based tools accept. Without a TCP port it names the socket directory as host.
func (c *Cluster) URL(dbname string) string {
	if c.port != 0 {
		return fmt.Sprintf("postgres://postgres@localhost:%d/%s?sslmode=disable", c.port, url.PathEscape(dbname))
	}
	// Slashes are legal in a query value; keeping them makes the URL readable.
	host := strings.ReplaceAll(url.QueryEscape(c.runDir), "%2F", "/")
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", url.PathEscape(dbname), host, socketOnlyPort)
}

// SocketAddr returns the host and port libpq reaches the server at, as another server needs
// them (a Citus coordinator naming its workers): localhost and the TCP port, or else the socket
// directory, which libpq takes for a host.
func (c *Cluster) SocketAddr() (host string, port int) {
	if c.port != 0 {
		return "localhost", c.port
	}
	return c.runDir, socketOnlyPort
}

// DataDir returns the directory holding the cluster's data.
func (c *Cluster) DataDir() string {
	return c.dataDir
}
