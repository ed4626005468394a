package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// service keeps one process running the way a process manager does: whenever it exits, for
// whatever reason, it is started again after restartDelay, until stop. The soak kills the
// process through it, and it tells a kill from an exit nobody asked for.
type service struct {
	label string // e.g. api-1
	name  string // the command, e.g. api
	sup   *supervisor.Supervisor
	logf  func(string, ...any)

	// crashes counts the process's own crashes at fault points, so that stop can tell a
	// SIGKILL it caused itself while draining from a failure to stop.
	crashes func() int

	restartMu sync.Mutex // one restartWith at a time, or two could each start a process

	mu       sync.Mutex
	env      []string
	proc     *supervisor.Process // nil while waiting to restart
	stopping bool
	keeping  chan struct{} // closed when the keeper goroutine returns

	// envsAfterCrash replace env in turn, each once the process exits by itself (crashes): a
	// process armed to crash for certain at one point is restarted armed for the next, and at
	// last with chance alone.
	envsAfterCrash [][]string

	starts          int
	unexpectedExits int // exits that neither kill nor stop asked for: crashes
	startsRefused   int // exits at start for want of a database, during a database fault

	// crashesAtStart is crashes() when the running process started. A process crashes itself
	// at most once, so a count above it means the running process did, whether just before
	// stop sent SIGTERM or while it drained.
	crashesAtStart int
}

// restartDelay is how long a process manager waits before restarting a process that exited:
// long enough that clients see the replica gone, short enough that the soak keeps its
// replicas most of the time.
const restartDelay = 300 * time.Millisecond

func newService(sup *supervisor.Supervisor, events *eventLog, label, name string, env []string) *service {
	return &service{
		label:   label,
		name:    name,
		sup:     sup,
		env:     env,
		logf:    func(format string, args ...any) { events.note(fmt.Sprintf(format, args...)) },
		crashes: func() int { return events.crashes(label) },
	}
}

// start starts the process and keeps it running.
func (s *service) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = false
	if err := s.startLocked(); err != nil {
		return err
	}
	s.keeping = make(chan struct{})
	go s.keep(s.proc, s.keeping)
	return nil
}

func (s *service) startLocked() error {
	p, err := s.sup.Start(s.label, s.name, s.env)
	if err != nil {
		return fmt.Errorf("error starting %s: %w", s.label, err)
	}
	s.proc = p
	s.starts++
	s.crashesAtStart = s.crashes()
	return nil
}

// keep restarts the process each time it exits, until stop.
func (s *service) keep(p *supervisor.Process, done chan struct{}) {
	defer close(done)
	for {
		<-p.Done()
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		switch {
		case p.Expected():
		case p.GaveUpOnDatabase():
			// Started during a database fault, it waited its start's bound for the database and
			// gave up, as a process should; a process manager starts it again.
			s.startsRefused++
			s.logf("%s gave up waiting for the database at start: %v; starting it again", s.label, p.Err())
		default:
			s.unexpectedExits++
			s.logf("%s exited by itself: %v", s.label, p.Err())
			if len(s.envsAfterCrash) > 0 {
				s.env, s.envsAfterCrash = s.envsAfterCrash[0], s.envsAfterCrash[1:]
			}
		}
		s.proc = nil
		s.mu.Unlock()

		for {
			time.Sleep(restartDelay)
			s.mu.Lock()
			if s.stopping {
				s.mu.Unlock()
				return
			}
			err := s.startLocked()
			p = s.proc
			s.mu.Unlock()
			if err == nil {
				break
			}
			s.logf("%s", err)
		}
	}
}

// kill SIGKILLs the process, as a crash of its machine would, and lets the keeper restart it.
// It reports false if the process was not running.
func (s *service) kill() bool {
	s.mu.Lock()
	p := s.proc
	if p == nil || s.stopping {
		s.mu.Unlock()
		return false
	}
	select {
	case <-p.Done():
		s.mu.Unlock()
		return false
	default:
	}
	s.mu.Unlock()
	p.Kill()
	return true
}

// freeze stops the process with SIGSTOP, as a paused VM or a long stop-the-world pause would,
// for d or until ctx ends, then lets it go on with SIGCONT. Meanwhile nobody restarts it. It
// reports false if the process was not running.
func (s *service) freeze(ctx context.Context, d time.Duration) bool {
	s.restartMu.Lock()
	defer s.restartMu.Unlock()
	s.mu.Lock()
	p := s.proc
	running := p != nil && !s.stopping
	s.mu.Unlock()
	if !running || p.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	_ = p.Signal(syscall.SIGCONT) // fails only if it died meanwhile
	return true
}

// stop ends the keeping and stops the process with SIGTERM. It returns an error if the process
// did not exit with status 0 in time, which every process of Rocket Rides promises.
func (s *service) stop() error {
	s.mu.Lock()
	s.stopping = true
	p, keeping, crashesAtStart := s.proc, s.keeping, s.crashesAtStart
	s.mu.Unlock()
	if keeping == nil {
		return nil
	}
	var err error
	if p != nil {
		select {
		case <-p.Done(): // it exited on its own just now: the keeper counted it
		default:
			stopErr := p.Stop()
			switch {
			case stopErr == nil:
			case s.crashes() > crashesAtStart:
				s.logf("%s crashed at a fault point while stopping: %v", s.label, stopErr)
			default:
				err = fmt.Errorf("%s did not stop cleanly on SIGTERM: %w", s.label, stopErr)
			}
		}
	}
	<-keeping
	return err
}

// restartWith stops the process and starts it again with env, as a deploy would. Nil env keeps
// the environment it has.
func (s *service) restartWith(env []string) error {
	s.restartMu.Lock()
	defer s.restartMu.Unlock()
	stopErr := s.stop()
	if env != nil {
		s.mu.Lock()
		s.env, s.envsAfterCrash = env, nil
		s.mu.Unlock()
	}
	if err := s.start(); err != nil {
		return err
	}
	return stopErr
}

// serviceCounts is a copy of a service's counters.
type serviceCounts struct {
	starts, unexpectedExits int
}

func (s *service) counts() serviceCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return serviceCounts{starts: s.starts, unexpectedExits: s.unexpectedExits}
}
