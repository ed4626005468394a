package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ownProcess is a process that a test started, itself or through a child, named by its pid and
// its start time: a pid that the kernel hands to someone else's process later is not mistaken
// for it.
type ownProcess struct {
	pid   int
	start string // field 22 of /proc/PID/stat, clock ticks after boot
	comm  string // the executable's name, as the kernel keeps it (15 bytes at most)
}

func (p ownProcess) String() string { return fmt.Sprintf("%s (pid %d)", p.comm, p.pid) }

// descendants returns every process below pid, from /proc: the processes that pid started and
// those they started in turn, whichever process group they moved to. Only these are a test's
// own; any other process on the machine, another checkout's dev stack included, is not. It fails
// the test when /proc cannot be read, rather than find nothing.
func descendants(t *testing.T, pid int) []ownProcess {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("error listing processes: %v", err)
	}
	children := map[int][]ownProcess{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		st, ok := readStat(t, child)
		if !ok {
			continue // it exited while we looked
		}
		children[st.ppid] = append(children[st.ppid], st.ownProcess)
	}
	var procs []ownProcess
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		procs = append(procs, queue[0])
		queue = append(queue, children[queue[0].pid]...)
	}
	return procs
}

// running reports whether p still runs: its pid exists with the same start time, and is not a
// zombie, which has exited and waits only for its parent to read its status.
func (p ownProcess) running(t *testing.T) bool {
	t.Helper()
	st, ok := readStat(t, p.pid)
	return ok && st.start == p.start && st.state != "Z"
}

// procStat is what descendants and running read of /proc/PID/stat.
type procStat struct {
	ownProcess
	state string
	ppid  int
}

// readStat reads /proc/pid/stat; ok is false if there is no such process (any more). Any other
// error fails the test.
func readStat(t *testing.T, pid int) (st procStat, ok bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return procStat{}, false
	}
	if err != nil {
		t.Fatalf("error reading process %d: %v", pid, err)
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
	text := string(data)
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || end < open {
		t.Fatalf("process %d: cannot read its stat %q", pid, text)
	}
	fields := strings.Fields(text[end+1:]) // fields[0] is field 3 of the stat line, state
	if len(fields) < 20 {
		t.Fatalf("process %d: cannot read its stat %q", pid, text)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("process %d: cannot read its parent in %q: %v", pid, text, err)
	}
	return procStat{
		ownProcess: ownProcess{pid: pid, start: fields[19], comm: text[open+1 : end]},
		state:      fields[0],
		ppid:       ppid,
	}, true
}

// checkNoneRunning fails the test if any of procs still runs.
func checkNoneRunning(t *testing.T, procs []ownProcess) {
	t.Helper()
	var left []string
	for _, p := range procs {
		if p.running(t) {
			left = append(left, p.String())
		}
	}
	if len(left) > 0 {
		t.Fatalf("processes left behind: %s", strings.Join(left, ", "))
	}
}

// checkRunsAll fails the test unless procs hold a process of every name in comms: the list of a
// stack's processes that a later check of what is left behind relies on.
func checkRunsAll(t *testing.T, procs []ownProcess, comms ...string) {
	t.Helper()
	for _, comm := range comms {
		if !slices.ContainsFunc(procs, func(p ownProcess) bool { return p.comm == comm }) {
			t.Fatalf("want a process %s among %v", comm, procs)
		}
	}
}

// TestDescendants checks the check: it finds the processes a child started, in a process group
// of their own too, and tells them running from gone.
func TestDescendants(t *testing.T) {
	t.Parallel()
	// sh starts a sleep in a group of its own (set -m), and one in its group.
	sh := exec.Command("sh", "-c", "set -m; sleep 60 & set +m; sleep 60 & wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Wait()
	})
	var procs []ownProcess
	for deadline := time.Now().Add(10 * time.Second); len(procs) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("want the two sleeps below sh, got %v", procs)
		}
		procs = descendants(t, sh.Process.Pid)
	}
	checkRunsAll(t, procs, "sleep")
	for _, p := range procs {
		if !p.running(t) {
			t.Fatalf("want %s running", p)
		}
		if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if err := sh.Wait(); err != nil {
		t.Fatalf("sh: %v", err)
	}
	checkNoneRunning(t, procs)
	if self := (ownProcess{pid: os.Getpid()}); self.running(t) {
		t.Fatal("want a process with the right pid but another start time not taken for it")
	}
}
