package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// mainHelperEnv makes the test binary act as a process whose main is a call to Main.
const mainHelperEnv = "CLI_MAIN_HELPER"

// TestMainSecondSignal stops a process with SIGINT and sends it a second SIGINT once its run has
// returned, as happens under Ctrl-C with a Procfile manager that passes the signal on: the
// terminal signals the whole process group, then the manager signals each process again. The
// process must still exit 0, not be killed by the second signal on its way out.
func TestMainSecondSignal(t *testing.T) {
	if os.Getenv(mainHelperEnv) == "1" {
		Main("helper", func(ctx context.Context) error {
			os.Stdout.WriteString("ready\n")
			<-ctx.Done()
			return nil
		})
		// What follows Main in a real main is the process's exit; a signal can arrive until then.
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(200 * time.Millisecond)
		os.Exit(0)
	}
	t.Parallel()

	cmd := exec.Command(os.Args[0], "-test.run=^TestMainSecondSignal$")
	cmd.Env = append(os.Environ(), mainHelperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper printed %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("want exit status 0 after a second SIGINT on the way out, got %v", err)
	}
}
