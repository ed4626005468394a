// Package maintenance runs the background processes' work loop: call RunOnce, and when it found
// nothing to do, sleep until the next poll or until something wakes the loop early. The
// enqueuer, completer and reaper each wrap one of these, in the shape of River's maintenance
// services: New, Start, Stop, and a RunOnce that tests call directly.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Loop calls RunOnce until stopped.
type Loop struct {
	// Name prefixes log messages, e.g. "Enqueuer".
	Name string

	// RunOnce does one bounded batch of work. more reports that the batch was full, so that
	// the loop goes again at once instead of sleeping.
	RunOnce func(ctx context.Context) (more bool, err error)

	// Interval is how long to sleep after a batch that was not full, or after an error.
	Interval time.Duration

	// Wake, if set, cuts a sleep short: a notification that new work arrived.
	Wake <-chan struct{}

	Logger *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the loop in a goroutine until ctx ends or Stop is called.
func (l *Loop) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return // already started
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go l.run(ctx)
}

// Stop ends the loop and waits for the batch in progress, if any, to finish or be cancelled.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (l *Loop) run(ctx context.Context) {
	defer close(l.done)
	for {
		more, err := l.RunOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			l.Logger.ErrorContext(ctx, l.Name+": batch failed", slog.String("error", err.Error()))
			more = false
		}
		if more {
			continue
		}
		timer := time.NewTimer(l.Interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-l.Wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}
