package proctest_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

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
	var procs []proctest.OwnProcess
	for deadline := time.Now().Add(10 * time.Second); len(procs) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("want the two sleeps below sh, got %v", procs)
		}
		procs = proctest.Descendants(t, sh.Process.Pid)
	}
	proctest.CheckRunsAll(t, procs, "sleep")
	for _, p := range procs {
		if !p.Running(t) {
			t.Fatalf("want %s running", p)
		}
		if err := syscall.Kill(p.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if err := sh.Wait(); err != nil {
		t.Fatalf("sh: %v", err)
	}
	proctest.CheckNoneRunning(t, procs)
	if self := (proctest.OwnProcess{Pid: os.Getpid()}); self.Running(t) {
		t.Fatal("want a process with the right pid but another start time not taken for it")
	}
}
