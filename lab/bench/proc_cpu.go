package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHz is the unit of the CPU times in /proc/<pid>/stat: Linux reports them in clock ticks of
// 100 a second (USER_HZ) on every architecture, whatever the kernel's own tick.
const userHz = 100

// procTreeTries bounds the reads of a process tree whose root reaped a child during the read,
// procTreePause apart: a run's end closes its 16 or 32 sessions at once, and the postmaster reaps
// their backends one by one for a while (five quick tries were seen to fail on a loaded machine).
const (
	procTreeTries = 100
	procTreePause = 10 * time.Millisecond
)

// procTimes is what /proc/<pid>/stat says of a process's CPU: user plus system time.
type procTimes struct {
	ppid int
	// self is the process's own CPU time, all its threads.
	self time.Duration
	// reaped is the CPU time of its children that have exited and that it has waited for,
	// theirs and their own reaped children's (cutime + cstime).
	reaped time.Duration
}

// readProcTimes reads /proc/<pid>/stat under procDir (/proc, or a test's copy).
func readProcTimes(procDir string, pid int) (procTimes, error) {
	stat, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procTimes{}, fmt.Errorf("error reading the CPU time of process %d: %w", pid, err)
	}
	t, err := parseProcStat(string(stat))
	if err != nil {
		return procTimes{}, fmt.Errorf("error reading the CPU time of process %d: %w", pid, err)
	}
	return t, nil
}

// parseProcStat parses a /proc/<pid>/stat line: "pid (comm) state ppid ...", where field 14 is
// utime, 15 stime, 16 cutime and 17 cstime (proc(5)). comm may hold spaces and parentheses, so
// the fields are counted from its last ')'.
func parseProcStat(stat string) (procTimes, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return procTimes{}, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[end+1:]) // fields[0] is field 3, the state
	if len(fields) < 15 {
		return procTimes{}, fmt.Errorf("%d fields after the command name, want at least 15", len(fields))
	}
	var n [5]int64 // ppid, utime, stime, cutime, cstime
	for i, field := range []int{4, 14, 15, 16, 17} {
		v, err := strconv.ParseInt(fields[field-3], 10, 64)
		if err != nil {
			return procTimes{}, fmt.Errorf("field %d: %w", field, err)
		}
		n[i] = v
	}
	return procTimes{ppid: int(n[0]), self: ticks(n[1] + n[2]), reaped: ticks(n[3] + n[4])}, nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHz }

// treeCPU is the CPU time used so far by the process root and every process descended from it,
// the exited included: for each process of the tree that still runs, its own time and that of
// its children it has reaped. A descendant that exited has its time in its parent's reaped time
// once reaped, and is counted once: the reaped time of root, where Postgres's backends end up, is
// read before and after the walk, and the walk is made again if it changed in between, lest a
// backend be counted both alive and reaped, or neither.
func treeCPU(procDir string, root int) (time.Duration, error) {
	for range procTreeTries {
		before, err := readProcTimes(procDir, root)
		if err != nil {
			return 0, err
		}
		tree, err := descendants(procDir, root)
		if err != nil {
			return 0, err
		}
		after, err := readProcTimes(procDir, root)
		if err != nil {
			return 0, err
		}
		if after.reaped != before.reaped {
			time.Sleep(procTreePause)
			continue
		}
		total := after.self + after.reaped
		for _, p := range tree {
			total += p.times.self + p.times.reaped
		}
		return total, nil
	}
	return 0, fmt.Errorf("process %d kept reaping children while its CPU time was read, %d times", root, procTreeTries)
}

// procEntry is a process found in procDir, and its CPU times.
type procEntry struct {
	pid   int
	times procTimes
}

// descendants finds every process descended from root by their parent ids in procDir, and reads
// their CPU times. A process that exits during the walk is left out: its time is its parent's to
// count once reaped.
func descendants(procDir string, root int) ([]procEntry, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, fmt.Errorf("error listing processes: %w", err)
	}
	children := map[int][]procEntry{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		t, err := readProcTimes(procDir, pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return nil, err
		}
		children[t.ppid] = append(children[t.ppid], procEntry{pid, t})
	}
	var out []procEntry
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		for _, child := range children[queue[0]] {
			out = append(out, child)
			queue = append(queue, child.pid)
		}
	}
	return out, nil
}
