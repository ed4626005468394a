package main

import (
	"context"
	"fmt"
	"time"
)

// failoverWait bounds each step of a failover: the standby's promotion, the first ride booked
// after it, and the old primary's return as a standby. Tuned, each takes seconds; the bound is
// generous for a loaded two-core machine (a bound of one minute once ran out on a CI machine
// with the monitor not yet acting on the killed primary), and three of them stay within the time
// TestSoakFailover gives the whole soak, so that a failover that hangs is reported by the soak.
const failoverWait = 2 * time.Minute

// failover loses the primary's machine, by SIGKILL or SIGSTOP as f says, and waits for the
// standby to be promoted and for clients to book rides again; then it brings the old primary
// back (restarted, or thawed) and waits until it is the new primary's synchronous standby, so
// that the next failover loses nothing either. Once begun it runs to its end whatever ctx says:
// a soak must not end without a standby, or with a machine frozen. Only an interrupt of the
// whole soak cuts it short; stopping the formation then thaws and stops every node.
func (s *soak) failover(ctx context.Context, f fault) {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*failoverWait)
	defer cancel()
	defer context.AfterFunc(s.interrupted, cancel)()
	ha := s.st.formation
	old, err := ha.Primary(ctx)
	if err != nil || old < 0 {
		s.faultFailed(f, fmt.Errorf("no primary to lose (%d): %v", old, err))
		return
	}

	if f.kind == faultFailoverKill {
		err = ha.Kill(old)
	} else {
		err = ha.Freeze(old)
	}
	if err != nil {
		s.fatalf("fault %s: %v", f.kind, err)
		return
	}
	// The loss is counted from the moment every process of the node is dead or frozen: an
	// attempt sent while the signals went out could still be booked on the old primary, and
	// made a failover look over in 0.2 s (a soak at load 20), which hid its outage from the
	// receipt contract's bound.
	lost := time.Now()
	s.load.watchFrom(lost)
	s.events.note(fmt.Sprintf("fault %s: lost node%d, the primary", f.kind, old+1))
	if err := ha.WaitPromoted(ctx, 1-old); err != nil {
		s.fatalf("fault %s: the standby was not promoted: %v", f.kind, err)
		return
	}
	promoted := time.Since(lost)
	booked, ok := s.load.firstCreated(ctx, failoverWait)
	if !ok {
		s.fatalf("fault %s: no ride was booked within %s of the standby's promotion", f.kind, failoverWait)
		return
	}
	window := booked.Sub(lost)
	s.events.note(fmt.Sprintf("fault %s: node%d promoted after %s; first ride booked %s after the loss",
		f.kind, 2-old, promoted.Round(time.Millisecond), window.Round(time.Millisecond)))

	if f.kind == faultFailoverKill {
		err = ha.RunNode(old)
	} else {
		err = ha.Thaw(old)
	}
	if err == nil {
		err = ha.WaitHealthy(ctx)
	}
	if err != nil {
		s.fatalf("fault %s: node%d did not come back as the standby: %v", f.kind, old+1, err)
		return
	}
	s.events.note(fmt.Sprintf("fault %s: node%d is the standby again", f.kind, old+1))
	s.mu.Lock()
	s.unavailable = append(s.unavailable, window)
	s.mu.Unlock()
	s.count(f.kind, 1)
}

// fatalf ends the soak: the stack broke beyond what the soak can repair.
func (s *soak) fatalf(format string, args ...any) {
	select {
	case s.fatal <- fmt.Errorf(format, args...):
	default:
	}
}
