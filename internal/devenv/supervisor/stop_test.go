package supervisor

import (
	"errors"
	"io"
	"os/exec"
	"syscall"
	"testing"
)

// TestStopWhileStarting stops two shells with SIGTERM, which kills a shell: the one that has
// printed nothing counts as stopped while starting, a clean stop, and the one that has printed
// a line broke the promise to exit 0, for Stop and for StopAll.
func TestStopWhileStarting(t *testing.T) {
	t.Parallel()
	shell, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	sup := New("/", NewPrefixWriter(io.Discard)) // binDir "/" and an absolute name: the shell itself
	start := func(label, script string) *Process {
		t.Helper()
		p, err := sup.Start(label, shell, nil, "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitPrinted := func(p *Process) {
		t.Helper()
		if _, err := p.FirstLine(t.Context(), "up"); err != nil {
			t.Fatal(err)
		}
	}

	silent := start("silent", "exec sleep 60")
	if err := silent.Stop(); err != nil {
		t.Errorf("Stop of a process that printed nothing: want nil, got %v", err)
	}
	talking := start("talking", "echo up; exec sleep 60")
	waitPrinted(talking)
	if err := talking.Stop(); !killedBySIGTERM(err) {
		t.Errorf("Stop of a process that printed a line: want death by SIGTERM, got %v", err)
	}

	silent = start("silent-2", "exec sleep 60")
	talking = start("talking-2", "echo up; exec sleep 60")
	waitPrinted(talking)
	err = sup.StopAll()
	if !killedBySIGTERM(err) {
		t.Errorf("StopAll: want talking-2's death by SIGTERM, got %v", err)
	}
	if err == nil || err.Error() != "talking-2: signal: terminated" {
		t.Errorf("StopAll: want talking-2's error alone, got %v", err)
	}
	if silent.Err() == nil {
		t.Errorf("silent-2 still runs or exited 0; want it killed by SIGTERM")
	}
}

func killedBySIGTERM(err error) bool {
	exit, ok := errors.AsType[*exec.ExitError](err)
	if !ok {
		return false
	}
	status, ok := exit.Sys().(syscall.WaitStatus)
	return ok && status.Signaled() && status.Signal() == syscall.SIGTERM
}
