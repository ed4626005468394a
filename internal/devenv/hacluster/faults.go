package hacluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kill loses node i's machine: its keeper and its Postgres die at once (SIGKILL), with nothing
// written or said to anyone. RunNode brings it back, as a standby once the other took over.
func (f *Formation) Kill(i int) error {
	n := f.nodes[i]
	n.mu.Lock()
	running := n.keeper != nil
	n.mu.Unlock()
	if !running {
		return fmt.Errorf("%s is not running", n.name)
	}
	return n.kill()
}

// Freeze stops node i's keeper and Postgres where they stand (SIGSTOP), as a machine that hangs
// does: connections to it are neither answered nor closed. Thaw lets them go on.
func (f *Formation) Freeze(i int) error { return f.signalNode(i, syscall.SIGSTOP) }

// Thaw lets a frozen node i go on (SIGCONT). Its keeper then learns from the monitor that it was
// demoted, and turns its Postgres into the new primary's standby.
func (f *Formation) Thaw(i int) error { return f.signalNode(i, syscall.SIGCONT) }

func (f *Formation) signalNode(i int, sig syscall.Signal) error {
	n := f.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keeper == nil {
		return fmt.Errorf("%s is not running", n.name)
	}
	return signalTree(n.keeper.Process.Pid, n.pgdata, sig)
}

// RunNode starts node i's keeper again after Kill.
func (f *Formation) RunNode(i int) error {
	return f.runKeeper(f.nodes[i])
}

// SetSynchronous makes commits on the primary wait for the standby (on, the formation's normal
// state) or not. Off is for tests of what an asynchronous standby loses: the standby stops
// counting towards the replication quorum, and the primary acknowledges commits it alone holds.
func (f *Formation) SetSynchronous(ctx context.Context, on bool) error {
	primary, err := f.Primary(ctx)
	if err != nil || primary < 0 {
		return errors.Join(errors.New("no primary to set replication on"), err)
	}
	standby := f.nodes[1-primary]
	if err := f.run(ctx, "set", "node", "replication-quorum", strconv.FormatBool(on), "--pgdata", standby.pgdata); err != nil {
		return err
	}
	// The primary goes through a state or two to apply it.
	if err := f.WaitHealthy(ctx); err != nil {
		return err
	}
	return f.poll(ctx, "synchronous_standby_names to follow", func(ctx context.Context) (bool, error) {
		var names string
		err := f.queryNode(ctx, primary, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SELECT current_setting('synchronous_standby_names')").Scan(&names)
		})
		return err == nil && (names != "") == on, nil
	})
}

// PauseReplication stops the primary's WAL senders where they stand (SIGSTOP), so that the
// standby receives nothing more until resume is called; with SetSynchronous(false), the primary
// goes on acknowledging commits that only it holds.
func (f *Formation) PauseReplication(ctx context.Context) (resume func() error, err error) {
	primary, err := f.Primary(ctx)
	if err != nil || primary < 0 {
		return nil, errors.Join(errors.New("no primary to pause replication of"), err)
	}
	var pids []int
	err = f.queryNode(ctx, primary, func(conn *pgx.Conn) error {
		rows, _ := conn.Query(ctx, "SELECT pid FROM pg_stat_replication")
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, errors.New("the primary has no WAL sender to pause")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, err
		}
	}
	return func() error {
		var errs []error
		for _, pid := range pids {
			errs = append(errs, syscall.Kill(pid, syscall.SIGCONT))
		}
		return errors.Join(errs...)
	}, nil
}

// queryNode runs fn on a connection of its own to node i.
func (f *Formation) queryNode(ctx context.Context, i int, fn func(conn *pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, f.NodeURL(i)+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// signalTree sends sig to the keeper whose pid is keeperPID (none if 0), to every process whose
// command line names pgdata (the postmaster, pg_autoctl's services), and to every process below
// those: Postgres's processes need not stay in the keeper's process group, so they are found by
// their parents. The postmaster is signalled first, so that a SIGSTOP or SIGKILL leaves it
// forking no process that the scan misses. A second scan catches a process forked before its
// parent got the signal: one a keeper forked to start Postgres the moment it was killed has
// lost that parent, but names pgdata (a CI soak's killed primary went on serving for minutes).
func signalTree(keeperPID int, pgdata string, sig syscall.Signal) error {
	var errs []error
	signalled := map[int]bool{}
	for range 2 {
		var roots []int
		if pid, err := postmasterPID(pgdata); err == nil {
			roots = append(roots, pid)
		}
		roots = append(roots, namingDataDir(pgdata)...)
		if keeperPID != 0 {
			roots = append(roots, keeperPID)
		}
		for _, pid := range descendants(roots) {
			if signalled[pid] {
				continue
			}
			signalled[pid] = true
			if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("error signalling process %d: %w", pid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// namingDataDir returns every process that runs on pgdata, as -D or --pgdata says: the
// postmaster, pg_ctl, pg_autoctl's processes, and a child that one of them forked and that is
// not yet another program. Another process that only names the directory (an operator's du,
// an editor) is not one of them. A process that died and waits to be reaped has no arguments
// left, and is not returned.
func namingDataDir(pgdata string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		for i, arg := range args {
			if arg == "-D"+pgdata || arg == "--pgdata="+pgdata ||
				(arg == "-D" || arg == "--pgdata") && i+1 < len(args) && args[i+1] == pgdata {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killAll sends SIGKILL to every process of pgdata, again and again, until none is left and
// nothing answers on port, Postgres's; or it gives up after within and says what still runs.
func killAll(pgdata string, port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		left := descendants(namingDataDir(pgdata))
		answers := portAnswers(port)
		if len(left) == 0 && !answers {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processes of %s outlived %s of SIGKILLs: %v still run, and port %d answers: %t",
				pgdata, within, left, port, answers)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// portAnswers reports whether something accepts connections on port of the loopback address.
func portAnswers(port int) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// postmasterPID reads the pid of the Postgres running on pgdata from its postmaster.pid, and
// checks that the process of that pid is that Postgres: a file left by a Postgres that died
// may name a pid that the system gave to another process since.
func postmasterPID(pgdata string) (int, error) {
	data, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		return 0, err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(pgdata)) {
		return 0, fmt.Errorf("no Postgres of %s runs as process %d", pgdata, pid)
	}
	return pid, nil
}

// descendants returns roots and every process below them, parents first, from /proc.
func descendants(roots []int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := parentPID(pid); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	var all []int
	for queue := roots; len(queue) > 0; {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		all = append(all, pid)
		queue = append(queue, children[pid]...)
	}
	return all
}

// parentPID reads a process's parent from /proc/PID/stat, whose second field, the command in
// parentheses, may itself hold spaces and parentheses.
func parentPID(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(fields[1])
}

// prefixed writes each line written to the returned writer to w, with the node's name in front.
// Once the writer is closed, flushed closes when every line has been written.
func prefixed(w io.Writer, name string) (_ io.WriteCloser, flushed <-chan struct{}) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		scanner := bufio.NewScanner(pr)
		for scanner.Scan() {
			fmt.Fprintf(w, "%s | %s\n", name, scanner.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return pw, done
}
