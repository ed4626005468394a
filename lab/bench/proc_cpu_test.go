package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stat string
		want       procTimes
	}{
		{"Postgres", "4242 (postgres) S 4200 4200 4200 0 -1 4194368 1 0 0 0 213 57 1090 410 20 0 1 0 3116573 3133440 382\n",
			procTimes{ppid: 4200, self: 2700 * time.Millisecond, reaped: 15 * time.Second}},
		{"CommandWithSpacesAndParentheses", "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 0 0 0",
			procTimes{ppid: 1, self: 30 * time.Millisecond, reaped: 70 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat(tc.stat)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("want %+v, got %+v", tc.want, got)
			}
		})
	}
	for _, stat := range []string{"", "7 no name S 1", "7 (sh) S 1 7 7 0 -1 0 0 0 0 0 1 2 3", "7 (sh) S 1 7 7 0 -1 0 0 0 0 0 x 2 3 4 20"} {
		if _, err := parseProcStat(stat); err == nil {
			t.Errorf("%q: want an error", stat)
		}
	}
}

// TestTreeCPU reads a tree from a copy of /proc: a root that reaped children, a child that has
// a child of its own, and a process outside the tree.
func TestTreeCPU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stat := func(pid, ppid, utime, stime, cutime, cstime int) {
		t.Helper()
		line := strconv.Itoa(pid) + " (postgres: rider) S " + strconv.Itoa(ppid) + " 1 1 0 -1 0 0 0 0 0 " +
			strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " " + strconv.Itoa(cutime) + " " + strconv.Itoa(cstime) + " 20 0 1 0 0 0 0\n"
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid), "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(100, 1, 10, 5, 30, 10) // the postmaster: 0.15 s its own, 0.4 s of backends it reaped
	stat(101, 100, 200, 100, 0, 0)
	stat(102, 101, 7, 3, 0, 0)
	stat(200, 1, 1000, 1000, 0, 0) // not in the tree
	if err := os.MkdirAll(filepath.Join(dir, "self"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := treeCPU(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3650 * time.Millisecond; got != want {
		t.Fatalf("want %s (15 + 40 + 300 + 10 ticks), got %s", want, got)
	}
	if _, err := treeCPU(dir, 300); err == nil {
		t.Fatal("want an error for a root that is not there")
	}
}

// TestTreeCPUOfRealProcesses burns CPU in two children of a shell that exit and are reaped, and
// in the shell itself, and compares the tree's time with what the kernel reports for the shell
// once it has exited, its reaped children included (wait4's rusage).
func TestTreeCPUOfRealProcesses(t *testing.T) {
	t.Parallel()
	const burn = `i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done`
	cmd := exec.Command("sh", "-c", "("+burn+"); ("+burn+"); "+burn+"; echo burnt; read line || true")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "burnt\n" {
		t.Fatalf("want the shell to say it burnt, got %q, %v", line, err)
	}
	tree, err := treeCPU("/proc", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	kernel := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if kernel < 100*time.Millisecond {
		t.Fatalf("the shell burnt only %s, too little to compare", kernel)
	}
	// /proc rounds each process's time down to a tick; the shell's own and its reaped children's.
	if diff := (kernel - tree).Abs(); diff > 3*time.Second/userHz {
		t.Fatalf("want the tree's CPU time close to the kernel's %s, got %s", kernel, tree)
	}
}
