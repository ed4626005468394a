package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/internal/supervisor"
)

// apiStartTimeout bounds the wait for a started API to answer GET /readyz.
const apiStartTimeout = 30 * time.Second

// apiLogTailBytes is how much of the API's log an error quotes.
const apiLogTailBytes = 4 << 10

// apiProcess is a running cmd/api.
type apiProcess struct {
	cmd     *exec.Cmd
	logPath string
	url     string
	done    chan struct{} // closed once the process has exited
	stopped bool
}

// startAPI starts the API on a free loopback port with env, and returns once it is ready.
func startAPI(ctx context.Context, binary, logPath string, env []string) (*apiProcess, error) {
	port, err := supervisor.FreePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("error creating the API's log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(binary)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "PORT=" + strconv.Itoa(port)}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It dies with us, and a Ctrl-C in the terminal reaches only us: we stop it ourselves.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("error starting the API: %w", err)
	}
	p := &apiProcess{cmd: cmd, logPath: logPath, url: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// waitReady polls GET /readyz until it answers 200: the API listens and reaches its database.
func (p *apiProcess) waitReady(ctx context.Context) error {
	httpClient := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(apiStartTimeout)
	for {
		if checkReady(ctx, httpClient, p.url) == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the API exited while starting (%s); its log ends with:\n%s", p.cmd.ProcessState, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API is not ready after %s; its log ends with:\n%s", apiStartTimeout, p.logTail())
		}
	}
}

// stop stops the API as a process manager would, SIGTERM and then, past the grace the API
// promises to stop within, SIGKILL. Stopping a stopped API does nothing.
func (p *apiProcess) stop() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	select {
	case <-p.done:
		return fmt.Errorf("the API exited before it was stopped (%s); its log ends with:\n%s", p.cmd.ProcessState, p.logTail())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("error stopping the API: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(supervisor.StopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("the API did not stop within %s of SIGTERM, killed it; its log ends with:\n%s", supervisor.StopTimeout, p.logTail())
	}
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("the API stopped with %s; its log ends with:\n%s", p.cmd.ProcessState, p.logTail())
	}
	return nil
}

func (p *apiProcess) logTail() string {
	log, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(unreadable: %s)", err)
	}
	return string(log[max(len(log)-apiLogTailBytes, 0):])
}
