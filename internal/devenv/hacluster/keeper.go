package hacluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
)

// memorySettings replace the memory pg_autoctl sizes every instance for (a quarter of the
// machine's memory as shared_buffers, and more): three instances on one development machine
// would claim more than it has. Appended to postgresql.conf, whose later lines win; a standby
// copies its primary's.
const memorySettings = `
# Rocket Rides' development formation: three instances share one machine.
shared_buffers = '128MB'
effective_cache_size = '1GB'
maintenance_work_mem = '64MB'
work_mem = '4MB'
wal_keep_size = '512MB'
max_connections = 300
`

// pgAutoctl builds a pg_autoctl command run as Postgres's owner, its configuration and state
// kept in the formation's directory rather than in the owner's home.
func (f *Formation) pgAutoctl(ctx context.Context, args ...string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, "pg_autoctl", args...)
	xdg := filepath.Join(f.dir, "xdg")
	cmd.Env = append(os.Environ(),
		"PATH="+f.binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PG_CONFIG="+filepath.Join(f.binDir, "pg_config"),
		"HOME="+f.dir,
		"XDG_CONFIG_HOME="+filepath.Join(xdg, "config"),
		"XDG_DATA_HOME="+filepath.Join(xdg, "data"),
		"XDG_RUNTIME_DIR="+filepath.Join(xdg, "run"),
	)
	cmd.Dir = f.dir
	cmd.Stdout, cmd.Stderr = f.output, f.output
	if err := pgcluster.RunAsOwner(cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

// run runs pg_autoctl to its end.
func (f *Formation) run(ctx context.Context, args ...string) error {
	cmd, err := f.pgAutoctl(ctx, args...)
	if err != nil {
		return err
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_autoctl %s: %w", args[0]+" "+args[1], err)
	}
	return nil
}

// created reports whether n's data directory holds an instance.
func (n *node) created() bool {
	_, err := os.Stat(filepath.Join(n.pgdata, "PG_VERSION"))
	return err == nil
}

func (f *Formation) startMonitor(ctx context.Context, tuned bool) error {
	m := f.monitor
	if !m.created() {
		f.logger.InfoContext(ctx, "HA: creating the monitor", "port", m.port)
		if err := f.run(ctx, "create", "monitor", "--pgdata", m.pgdata, "--pgport", strconv.Itoa(m.port),
			"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", filepath.Join(f.binDir, "pg_ctl")); err != nil {
			return err
		}
		// The monitor has no --listen; its Postgres listens on every address unless told.
		if err := f.run(ctx, "config", "set", "--pgdata", m.pgdata, "postgresql.listen_addresses", "127.0.0.1"); err != nil {
			return err
		}
		if err := appendSettings(m.pgdata); err != nil {
			return err
		}
	}
	if err := f.runKeeper(m); err != nil {
		return err
	}
	if err := f.waitMonitor(ctx); err != nil {
		return err
	}
	return f.setMonitorTiming(ctx, tuned)
}

func (f *Formation) startNode(ctx context.Context, n *node, tuned bool) error {
	if !n.created() {
		f.logger.InfoContext(ctx, "HA: creating a data node", "node", n.name, "port", n.port)
		if err := f.run(ctx, "create", "postgres", "--pgdata", n.pgdata, "--pgport", strconv.Itoa(n.port),
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", n.name, "--dbname", f.database,
			"--auth", "trust", "--no-ssl", "--monitor", f.monitorNodeURL(), "--pgctl", filepath.Join(f.binDir, "pg_ctl")); err != nil {
			return err
		}
		if err := appendSettings(n.pgdata); err != nil {
			return err
		}
	}
	partition := keeperPartitionTimeoutDefault
	if tuned {
		partition = keeperPartitionTimeoutTuned
	}
	if err := f.run(ctx, "config", "set", "--pgdata", n.pgdata, "timeout.network_partition_timeout", strconv.Itoa(partition)); err != nil {
		return err
	}
	if err := f.runKeeper(n); err != nil {
		return err
	}
	// The second node's creation clones the first, which must be up and registered as primary.
	return f.waitRegistered(ctx, n)
}

// appendSettings appends memorySettings to the instance's postgresql.conf.
func appendSettings(pgdata string) error {
	file, err := os.OpenFile(filepath.Join(pgdata, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = file.WriteString(memorySettings)
	return errors.Join(err, file.Close())
}

// runKeeper starts n's keeper, pg_autoctl run, which starts its Postgres and, for a data node,
// takes its orders from the monitor.
func (f *Formation) runKeeper(n *node) error {
	cmd, err := f.pgAutoctl(context.Background(), "run", "--pgdata", n.pgdata)
	if err != nil {
		return err
	}
	out, flushed := prefixed(f.output, n.name)
	cmd.Stdout, cmd.Stderr = out, out
	// A process of the node that outlived its keeper may hold the output open; Wait gives up
	// on it after this long.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("error starting the keeper of %s: %w", n.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		<-flushed // every line written before anyone learns that the keeper is gone
		close(exited)
	}()
	n.mu.Lock()
	n.keeper, n.exited = cmd, exited
	n.mu.Unlock()
	return nil
}

// stopTimeout bounds a keeper's clean stop, its Postgres's included.
const stopTimeout = 30 * time.Second

// stopNode stops n's keeper and Postgres: cleanly through pg_autoctl stop, and by SIGKILL to
// whatever is left of it after stopTimeout.
func (f *Formation) stopNode(ctx context.Context, n *node) error {
	n.mu.Lock()
	keeper, exited := n.keeper, n.exited
	n.mu.Unlock()
	if keeper == nil {
		// A Postgres can outlive its keeper (a create cut short, a keeper killed alone).
		return signalTree(0, n.pgdata, syscall.SIGKILL)
	}
	// A frozen node must be thawed to stop.
	_ = signalTree(keeper.Process.Pid, n.pgdata, syscall.SIGCONT)
	_ = keeper.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
	case <-ctx.Done():
	}
	return n.kill()
}

// kill sends SIGKILL to n's keeper and its Postgres, every process of them, and waits for the
// keeper to be gone, every other process of n too, and n's port to be silent.
func (n *node) kill() error {
	n.mu.Lock()
	keeper, exited := n.keeper, n.exited
	n.mu.Unlock()
	if keeper == nil {
		return nil
	}
	err := signalTree(keeper.Process.Pid, n.pgdata, syscall.SIGKILL)
	<-exited
	n.mu.Lock()
	n.keeper = nil
	n.mu.Unlock()
	// Whatever a signal missed is found again; the node is lost only once its port is silent.
	return errors.Join(err, killAll(n.pgdata, n.port, killTimeout))
}

// killTimeout bounds the wait for a killed node's last process to be gone.
const killTimeout = 10 * time.Second
