package maintenance

import "context"

// StartStop is the Start and Stop of a service whose only background work is one Loop. The
// completer and the reaper embed it, so that each writes only its own RunOnce.
type StartStop struct {
	loop *Loop
}

// NewStartStop returns the StartStop that runs loop.
func NewStartStop(loop *Loop) StartStop { return StartStop{loop: loop} }

// Start runs passes in the background until ctx ends or Stop is called. It always returns nil;
// the error is there because another service's Start can fail (the enqueuer's must listen first).
func (s StartStop) Start(ctx context.Context) error {
	s.loop.Start(ctx)
	return nil
}

// Stop ends the background passes and waits for the one in progress to finish.
func (s StartStop) Stop() { s.loop.Stop() }
