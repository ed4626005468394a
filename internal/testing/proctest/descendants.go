package proctest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// OwnProcess is a process that a test started, itself or through a child, named by its pid and
// its start time: a pid that the kernel hands to someone else's process later is not mistaken
// for it.
type OwnProcess struct {
	Pid   int
	Start string // field 22 of /proc/PID/stat, clock ticks after boot
	Comm  string // the executable's name, as the kernel keeps it (15 bytes at most)
}

func (p OwnProcess) String() string { return fmt.Sprintf("%s (pid %d)", p.Comm, p.Pid) }

// procRoot is where the kernel shows its processes; tests of this file point it elsewhere to
// see a failed read fail the test.
var procRoot = "/proc"

// Descendants returns every process below pid, from /proc: the processes that pid started and
// those they started in turn, whichever process group they moved to. Only these are a test's
// own; any other process on the machine, another checkout's dev stack included, is not. It fails
// the test when /proc cannot be read, rather than find nothing.
func Descendants(t testing.TB, pid int) []OwnProcess {
	t.Helper()
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		t.Fatalf("error listing processes: %v", err)
	}
	children := map[int][]OwnProcess{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		st, ok := readStat(t, child)
		if !ok {
			continue // it exited while we looked
		}
		children[st.ppid] = append(children[st.ppid], st.OwnProcess)
	}
	var procs []OwnProcess
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		procs = append(procs, queue[0])
		queue = append(queue, children[queue[0].Pid]...)
	}
	return procs
}

// Running reports whether p still runs: its pid exists with the same start time, and is not a
// zombie, which has exited and waits only for its parent to read its status.
func (p OwnProcess) Running(t testing.TB) bool {
	t.Helper()
	st, ok := readStat(t, p.Pid)
	return ok && st.Start == p.Start && st.state != "Z"
}

// procStat is what Descendants and Running read of /proc/PID/stat.
type procStat struct {
	OwnProcess
	state string
	ppid  int
}

// readStat reads /proc/pid/stat; ok is false if there is no such process (any more). Any other
// error fails the test.
func readStat(t testing.TB, pid int) (st procStat, ok bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
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
		OwnProcess: OwnProcess{Pid: pid, Start: fields[19], Comm: text[open+1 : end]},
		state:      fields[0],
		ppid:       ppid,
	}, true
}

// CheckNoneRunning fails the test if any of procs still runs.
func CheckNoneRunning(t testing.TB, procs []OwnProcess) {
	t.Helper()
	var left []string
	for _, p := range procs {
		if p.Running(t) {
			left = append(left, p.String())
		}
	}
	if len(left) > 0 {
		t.Fatalf("processes left behind: %s", strings.Join(left, ", "))
	}
}

// CheckRunsAll fails the test unless procs hold a process of every name in comms: the list of a
// stack's processes that a later check of what is left behind relies on.
func CheckRunsAll(t testing.TB, procs []OwnProcess, comms ...string) {
	t.Helper()
	for _, comm := range comms {
		if !slices.ContainsFunc(procs, func(p OwnProcess) bool { return p.Comm == comm }) {
			t.Fatalf("want a process %s among %v", comm, procs)
		}
	}
}

// Exe is the path of the binary p runs, or "" if it cannot be read (it exited, say).
func (p OwnProcess) Exe() string {
	exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.Pid), "exe"))
	return exe
}
