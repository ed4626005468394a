package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long a process gets to exit after SIGTERM before it is killed. The
// processes promise to stop within 10 s; a little more absorbs a loaded machine.
const stopTimeout = 12 * time.Second

// supervisor runs the commands as child processes, like a Procfile manager: output prefixed by
// name, SIGTERM to all on stop, SIGKILL to what is left after stopTimeout.
type supervisor struct {
	out    *prefixWriter
	binDir string

	mu     sync.Mutex
	procs  []*process
	exited chan *process // a process that exited on its own
}

type process struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
	lines chan string // stdout lines, for firstLine
}

func (s *supervisor) command(name string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.binDir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	// Kill the child if dev itself is killed, so that nothing is left behind even then.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// start runs a long-lived process.
func (s *supervisor) start(name string, env []string, args ...string) (*process, error) {
	s.mu.Lock()
	if s.exited == nil {
		s.exited = make(chan *process, 16)
	}
	s.mu.Unlock()

	p := &process{name: name, cmd: s.command(name, env, args...), done: make(chan struct{}), lines: make(chan string, 64)}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("error starting %s: %w", name, err)
	}
	var copying sync.WaitGroup
	copying.Add(2)
	go func() { defer copying.Done(); s.copyLines(name, stdout, p.lines) }()
	go func() { defer copying.Done(); s.copyLines(name, stderr, nil) }()
	go func() {
		copying.Wait()
		p.err = p.cmd.Wait()
		close(p.done)
		s.exited <- p
	}()

	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

func (s *supervisor) copyLines(name string, r io.Reader, lines chan<- string) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		s.out.line(name, scanner.Text())
		if lines != nil {
			select {
			case lines <- scanner.Text():
			default: // nobody is waiting for lines any more
			}
		}
	}
}

// firstLine waits for the first stdout line that starts with prefix.
func (p *process) firstLine(ctx context.Context, prefix string) (string, error) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line := <-p.lines:
			if strings.HasPrefix(line, prefix) {
				return strings.TrimSpace(line), nil
			}
		case <-p.done:
			return "", fmt.Errorf("%s exited: %v", p.name, p.err)
		case <-timeout:
			return "", fmt.Errorf("%s printed no line starting %q within 30 s", p.name, prefix)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// runToEnd runs a command to completion, its output prefixed like the others'.
func (s *supervisor) runToEnd(ctx context.Context, name string, env []string, args ...string) error {
	cmd := s.command(name, env, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if line != "" {
			s.out.line(name, line)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %s failed: %w", name, strings.Join(args, " "), err)
	}
	return ctx.Err()
}

// output runs a command to completion and returns its stdout; stderr is shown prefixed.
func (s *supervisor) output(ctx context.Context, name string, env []string, args ...string) ([]byte, error) {
	cmd := s.command(name, env, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s failed: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out, ctx.Err()
}

// stopAll sends SIGTERM to every running process, then kills what is left after stopTimeout.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()

	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(stopTimeout)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			s.out.line("dev", p.name+" did not stop in time; killing it")
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if p.err != nil {
			s.out.line("dev", fmt.Sprintf("%s exited: %v", p.name, p.err))
		}
	}
}

// prefixWriter writes whole lines with a padded name in front, like a Procfile manager.
type prefixWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *prefixWriter) line(name, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%-10s | %s\n", name, text)
}
