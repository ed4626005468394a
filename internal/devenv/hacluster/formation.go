// Package hacluster runs a highly available PostgreSQL on one machine, for development and for
// the failover tests: a pg_auto_failover monitor and two data nodes, a primary and its
// synchronous standby, all on loopback. When the primary is lost, the monitor promotes the
// standby; every process of Rocket Rides follows through its multi-host DATABASE_URL.
//
// In production the three run on three machines; docs/high-availability.md says how they are set up.
package hacluster

import (
	"cmp"
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
	"sync"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// ErrNotInstalled is returned by Start when pg_auto_failover is missing.
var ErrNotInstalled = errors.New("pg_auto_failover (pg_autoctl) not found: install it " +
	"(Debian: apt-get install postgresql-15-auto-failover pg-auto-failover-cli)")

// Config says where and how the formation runs.
type Config struct {
	// Dir holds the nodes' data. A formation already created there is started as it is, which
	// keeps a developer's rides across restarts. Empty: a temporary directory that Stop removes.
	Dir string

	// BasePort is the monitor's port; the nodes take the next two. 0: free ports.
	BasePort int

	// Database is the application's database, created on the primary. Default "rocketrides".
	Database string

	// Tuned replaces the monitor's failover timing with TunedSettings. pg_auto_failover's own
	// defaults take about 50 s to fail over; tuned, about 6 s.
	Tuned bool

	// BinDir holds the Postgres binaries; default as pgcluster.FindBinDir finds them.
	BinDir string

	// Output receives the keepers' logs. Default: discarded.
	Output io.Writer

	// Logger tells of what Start and the failovers do. Default: discarded.
	Logger *slog.Logger
}

// Formation is a running monitor and its two data nodes.
type Formation struct {
	dir      string
	temp     bool
	binDir   string
	database string
	output   io.Writer
	logger   *slog.Logger

	monitor *node
	nodes   [2]*node
}

// node is the monitor or a data node: its data directory and its keeper, pg_autoctl run, which
// starts and watches its Postgres.
type node struct {
	name   string
	pgdata string
	port   int

	mu     sync.Mutex
	keeper *exec.Cmd // nil while not running
	exited chan struct{}
}

// startTimeout bounds creating or starting the formation: initdb, a base backup and the
// registrations take seconds; a loaded CI machine is given more.
const startTimeout = 3 * time.Minute

// Start creates the formation in cfg.Dir, unless it exists there, starts the monitor and both
// nodes, and returns once one node is primary and the other its synchronous standby.
func Start(ctx context.Context, cfg Config) (_ *Formation, err error) {
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		return nil, ErrNotInstalled
	}
	binDir, err := pgcluster.FindBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	f := &Formation{
		dir:      cfg.Dir,
		binDir:   binDir,
		database: cmp.Or(cfg.Database, "rocketrides"),
		output:   cmp.Or[io.Writer](cfg.Output, io.Discard),
		logger:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
	}
	if f.dir == "" {
		sweepStale(f.logger)
		if f.dir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return nil, err
		}
		f.temp = true
		if err := os.WriteFile(filepath.Join(f.dir, creatorFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, err
	}
	// pg_autoctl writes beside the data directories (backups, renames), as their owner.
	for _, dir := range []string{f.dir, filepath.Join(f.dir, "xdg")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := pgcluster.GiveToOwner(dir); err != nil {
			return nil, err
		}
	}

	ports, err := f.ports(cfg.BasePort)
	if err != nil {
		return nil, err
	}
	f.monitor = &node{name: "monitor", pgdata: filepath.Join(f.dir, "monitor"), port: ports[0]}
	for i := range f.nodes {
		f.nodes[i] = &node{name: fmt.Sprintf("node%d", i+1), pgdata: filepath.Join(f.dir, fmt.Sprintf("node%d", i+1)), port: ports[i+1]}
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := f.startMonitor(ctx, cfg.Tuned); err != nil {
		return nil, err
	}
	for _, n := range f.nodes {
		if err := f.startNode(ctx, n, cfg.Tuned); err != nil {
			return nil, err
		}
	}
	if err := f.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// ports are the monitor's and the nodes' ports: those a formation in the directory was created
// with, base and the next two, or three free ones.
func (f *Formation) ports(base int) ([3]int, error) {
	var ports [3]int
	if saved, err := os.ReadFile(filepath.Join(f.dir, "ports")); err == nil {
		fields := strings.Fields(string(saved))
		for i := range ports {
			if i < len(fields) {
				ports[i], _ = strconv.Atoi(fields[i])
			}
		}
		return ports, nil
	}
	for i := range ports {
		if base != 0 {
			ports[i] = base + i
			continue
		}
		// Below the kernel's ephemeral range: a node binds its port seconds after it was drawn,
		// and a port from that range could meanwhile be any outgoing connection's.
		port, err := supervisor.FreePort()
		if err != nil {
			return ports, err
		}
		ports[i] = port
	}
	saved := fmt.Sprintf("%d %d %d\n", ports[0], ports[1], ports[2])
	return ports, os.WriteFile(filepath.Join(f.dir, "ports"), []byte(saved), 0o644)
}

// URL is the multi-host URL of database on the formation, which every process of Rocket Rides
// is given: pgx tries the hosts in turn and keeps the one that takes writes.
func (f *Formation) URL() string { return f.URLFor(f.database) }

// URLFor is the multi-host URL of database dbname on the formation.
func (f *Formation) URLFor(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?target_session_attrs=read-write&sslmode=disable",
		f.nodes[0].port, f.nodes[1].port, dbname)
}

// NodeURL is the URL of database on node i alone, whatever its role.
func (f *Formation) NodeURL(i int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", f.nodes[i].port, f.database)
}

// MonitorURL is the URL of the monitor's own database, as its superuser.
func (f *Formation) MonitorURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable", f.monitor.port)
}

// Dir is where the formation keeps its data and the keepers' configuration.
func (f *Formation) Dir() string { return f.dir }

// Stop stops the nodes and then the monitor, and removes a temporary directory.
func (f *Formation) Stop(ctx context.Context) error {
	var errs []error
	for _, n := range []*node{f.nodes[1], f.nodes[0], f.monitor} {
		if n != nil {
			errs = append(errs, f.stopNode(ctx, n))
		}
	}
	if f.temp {
		errs = append(errs, os.RemoveAll(f.dir))
	}
	return errors.Join(errs...)
}

// A temporary formation's directory, and the file in it that names the process that made it.
const (
	tempPrefix  = "rr-ha-"
	creatorFile = "creator"
)

// sweepStale stops what the temporary formations of processes that died without stopping them
// left running (their keepers die with them, their Postgres servers do not), and removes them: a
// test binary killed at its timeout must not leave servers to the next run.
func sweepStale(logger *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, creatorFile))
		if err != nil {
			continue // being made, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its creator lives
		}
		for _, name := range []string{"node1", "node2", "monitor"} {
			_ = signalTree(0, filepath.Join(dir, name), syscall.SIGKILL)
		}
		logger.Info("HA: removed the formation of a process that is gone", "dir", dir)
		_ = os.RemoveAll(dir)
	}
}
