// Package supervisor runs the project's commands as child processes, the way a Procfile manager
// does: output prefixed by name, SIGTERM to all on stop, SIGKILL to what is left after a grace
// period. cmd/dev runs the service with it, and lab/chaos kills and restarts pieces of it.
package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
)

// StopTimeout is how long a process gets to exit after SIGTERM before it is killed. The
// processes promise to stop within 10 s; a little more absorbs a loaded machine.
const StopTimeout = 12 * time.Second

// ModuleRoot finds the directory holding go.mod, upwards from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run this from inside the rocketrides module (no go.mod found above the working directory)")
		}
		dir = parent
	}
}

// Supervisor starts and stops child processes from the binaries in BinDir.
type Supervisor struct {
	binDir string
	out    *PrefixWriter

	mu     sync.Mutex
	procs  []*Process
	races  []string // race reports in the children's output, each after its label
	exited chan *Process
}

// New returns a Supervisor for the binaries in binDir, writing their output to out.
func New(binDir string, out *PrefixWriter) *Supervisor {
	return &Supervisor{binDir: binDir, out: out, exited: make(chan *Process, 64)}
}

// Exited delivers every process that exits, whatever the reason, once.
func (s *Supervisor) Exited() <-chan *Process { return s.exited }

// Process is a started child.
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	// stopping is set by Stop and Kill, so that a watcher of Exited can tell an expected exit.
	stopping atomic.Bool

	lines   chan string // stdout lines, for FirstLine
	printed atomic.Bool // it wrote a line to stdout or stderr

	// unreachable is set once the process said on stderr that it gave up waiting for its
	// database at start (cmd/internal/bootstrap's "database not reachable after").
	unreachable atomic.Bool
}

// gaveUpOnDatabase is what a command prints when it exits because its database did not answer
// within its start's wait.
const gaveUpOnDatabase = "database not reachable after"

// GaveUpOnDatabase reports whether the process exited because its database did not answer at
// start: what a database outage makes every process started during it do, which a process
// manager answers by starting it again.
func (p *Process) GaveUpOnDatabase() bool { return p.unreachable.Load() }

func (s *Supervisor) command(name string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.binDir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	// Kill the child if the supervising process dies, so that nothing is left behind even then.
	// A process group of its own keeps a terminal's Ctrl-C from reaching it directly: the
	// supervisor stops the children itself, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	return cmd
}

// Start runs a long-lived process. label prefixes its output (the name when empty).
func (s *Supervisor) Start(label, name string, env []string, args ...string) (*Process, error) {
	if label == "" {
		label = name
	}
	p := &Process{Name: label, cmd: s.command(name, env, args...), done: make(chan struct{}), lines: make(chan string, 64)}
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
	go func() { defer copying.Done(); s.copyLines(p, label, stdout, p.lines) }()
	go func() { defer copying.Done(); s.copyLines(p, label, stderr, nil) }()
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

func (s *Supervisor) copyLines(p *Process, label string, r io.Reader, lines chan<- string) {
	var races race.Collector
	defer func() { s.addRaces(label, races.Reports()) }()
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		p.printed.Store(true)
		if strings.Contains(scanner.Text(), gaveUpOnDatabase) {
			p.unreachable.Store(true)
		}
		s.out.Line(label, scanner.Text())
		races.Line(scanner.Text())
		if lines != nil {
			select {
			case lines <- scanner.Text():
			default: // nobody is waiting for lines any more
			}
		}
	}
}

// addRaces records reports, race reports in the output of the process labelled label.
func (s *Supervisor) addRaces(label string, reports []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reports {
		s.races = append(s.races, label+": "+r)
	}
}

// RaceReports returns the race detector's reports in the output of every process run so far,
// each after the label of its process: with commands built with -race (see Build), a caller
// such as lab/chaos fails on them, since a race is a bug even where no check caught its effect.
// A process's reports are all there once it has exited.
func (s *Supervisor) RaceReports() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.races)
}

// FirstLine waits up to 30 s for the first stdout line that starts with prefix.
func (p *Process) FirstLine(ctx context.Context, prefix string) (string, error) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line := <-p.lines:
			if strings.HasPrefix(line, prefix) {
				return strings.TrimSpace(line), nil
			}
		case <-p.done:
			return "", fmt.Errorf("%s exited: %v", p.Name, p.err)
		case <-timeout:
			return "", fmt.Errorf("%s printed no line starting %q within 30 s", p.Name, prefix)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Err is how the process exited; valid once Done is closed.
func (p *Process) Err() error { return p.err }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Expected reports whether the process was told to stop, by Stop or Kill.
func (p *Process) Expected() bool { return p.stopping.Load() }

// Signal sends the process sig.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process at once, as a crash would, and waits for it.
func (p *Process) Kill() {
	p.stopping.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM and waits up to StopTimeout, then kills. It returns the exit error, if any,
// but nil for a process that SIGTERM caught still starting (see stopErr).
func (p *Process) Stop() error {
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.stopErr()
	case <-time.After(StopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s and was killed", p.Name, StopTimeout)
	}
}

// stopErr is how the process answered SIGTERM: its exit error, or nil for a process that
// SIGTERM killed before it printed anything. Such a process was still starting: Go's runtime
// and the package inits run before cli.Main catches the signal, and until then SIGTERM
// ends a process at once, as it should, since it has done nothing yet. Every process prints
// its first line after cli.Main caught the signal, so once it has printed, death by
// SIGTERM is a broken promise, and stopErr returns it.
func (p *Process) stopErr() error {
	exit, ok := errors.AsType[*exec.ExitError](p.err)
	if !ok || p.printed.Load() {
		return p.err
	}
	if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() && status.Signal() == syscall.SIGTERM {
		return nil
	}
	return p.err
}

// RunToEnd runs a command to completion, its output prefixed like the others'.
func (s *Supervisor) RunToEnd(ctx context.Context, name string, env []string, args ...string) error {
	cmd := s.command(name, env, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	s.addRaces(name, race.Reports(buf.String()))
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if line != "" {
			s.out.Line(name, line)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %s failed: %w", name, strings.Join(args, " "), err)
	}
	return ctx.Err()
}

// Output runs a command to completion and returns its stdout; stderr is shown prefixed.
func (s *Supervisor) Output(ctx context.Context, name string, env []string, args ...string) ([]byte, error) {
	cmd := s.command(name, env, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	s.addRaces(name, race.Reports(stderr.String()))
	if err != nil {
		return nil, fmt.Errorf("%s %s failed: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out, ctx.Err()
}

// StopAll sends SIGTERM to every running process, then kills what is left after StopTimeout.
// It returns an error naming every process that did not exit cleanly, as Stop judges it.
func (s *Supervisor) StopAll() error {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()

	var running []*Process
	for _, p := range procs {
		select {
		case <-p.done:
		default:
			p.stopping.Store(true)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			running = append(running, p)
		}
	}
	var errs []error
	deadline := time.After(StopTimeout)
	for _, p := range running {
		select {
		case <-p.done:
			if err := p.stopErr(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
			}
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop in time and was killed", p.Name))
		}
	}
	return errors.Join(errs...)
}

// PrefixWriter writes whole lines with a padded label in front, like a Procfile manager.
type PrefixWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewPrefixWriter writes to w.
func NewPrefixWriter(w io.Writer) *PrefixWriter { return &PrefixWriter{w: w} }

// Line writes one line of text under label.
func (p *PrefixWriter) Line(label, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%-11s | %s\n", label, text)
}
