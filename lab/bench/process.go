package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// apiStartTimeout bounds the wait for a started API to answer GET /readyz.
const apiStartTimeout = 30 * time.Second

// logTailBytes is how much of a process's log an error quotes.
const logTailBytes = 4 << 10

// process is a running command of this module: the API, or a background process.
type process struct {
	name    string // "the API", "the worker", ...
	cmd     *exec.Cmd
	logPath string
	url     string        // the API's base URL; empty for the others
	done    chan struct{} // closed once the process has exited
	stopped bool
}

// buildInWorkDir builds ./cmd/<name> of this module for every name into a new temporary
// directory, which also takes the processes' logs; removeWorkDir removes it.
func buildInWorkDir(ctx context.Context, names ...string) (workDir string, removeWorkDir func() error, err error) {
	workDir, err = os.MkdirTemp("", "rrbench")
	if err != nil {
		return "", nil, fmt.Errorf("error creating a working directory: %w", err)
	}
	removeWorkDir = func() error { return os.RemoveAll(workDir) }
	root, err := supervisor.ModuleRoot()
	if err == nil {
		err = supervisor.Build(ctx, root, workDir, names...)
	}
	if err != nil {
		return "", nil, errors.Join(err, removeWorkDir())
	}
	return workDir, removeWorkDir, nil
}

// startProcess starts binary with env (and only that, and PATH), its output going to logPath.
// name says what it is in errors.
func startProcess(name, binary, logPath string, env []string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("error creating the log of %s: %w", name, err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(binary)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It dies with us, and a Ctrl-C in the terminal reaches only us: we stop it ourselves.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("error starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// startAPI starts the API on a free loopback port with env, and returns once it is ready.
func startAPI(ctx context.Context, binary, logPath string, env []string) (*process, error) {
	port, err := supervisor.FreePort()
	if err != nil {
		return nil, err
	}
	p, err := startProcess("the API", binary, logPath, append([]string{"PORT=" + strconv.Itoa(port)}, env...))
	if err != nil {
		return nil, err
	}
	p.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := p.waitReady(ctx); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// waitReady polls GET /readyz until it answers 200: the API listens and reaches its database.
func (p *process) waitReady(ctx context.Context) error {
	readyz, err := url.JoinPath(p.url, "readyz")
	if err != nil {
		return err
	}
	err = supervisor.WaitOK(ctx, readyz, apiStartTimeout, func() error {
		select {
		case <-p.done:
			return fmt.Errorf("the API exited while starting (%s)", p.cmd.ProcessState)
		default:
			return nil
		}
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w; its log ends with:\n%s", err, p.logTail())
	}
	return err
}

// stop stops the process as a process manager would, SIGTERM and then, past the grace the
// processes promise to stop within, SIGKILL. Stopping a stopped process does nothing.
func (p *process) stop() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	select {
	case <-p.done:
		return fmt.Errorf("%s exited before it was stopped (%s); its log ends with:\n%s", p.name, p.cmd.ProcessState, p.logTail())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("error stopping %s: %w", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(supervisor.StopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM, killed it; its log ends with:\n%s", p.name, supervisor.StopTimeout, p.logTail())
	}
	// Built with -race when bench is (its tests), a process that found a race exits 66 when
	// stopped, and its report may be far from the log's tail.
	if log, err := os.ReadFile(p.logPath); err == nil {
		if reports := race.Reports(string(log)); len(reports) > 0 {
			return fmt.Errorf("%s reported data races:\n%s", p.name, strings.Join(reports, "\n"))
		}
	}
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("%s stopped with %s; its log ends with:\n%s", p.name, p.cmd.ProcessState, p.logTail())
	}
	return nil
}

func (p *process) logTail() string {
	log, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(unreadable: %s)", err)
	}
	return string(log[max(len(log)-logTailBytes, 0):])
}
