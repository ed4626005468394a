package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoop(t *testing.T) {
	t.Parallel()

	t.Run("FullBatchesRunBackToBackThenSleep", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		idle := make(chan struct{}, 1)
		l := &Loop{
			Name: "Test", Interval: time.Hour, Logger: slog.New(slog.DiscardHandler),
			RunOnce: func(context.Context) (bool, error) {
				if calls.Add(1) < 3 {
					return true, nil
				}
				select {
				case idle <- struct{}{}:
				default:
				}
				return false, nil
			},
		}
		l.Start(context.Background())
		<-idle
		l.Stop()
		if n := calls.Load(); n != 3 {
			t.Fatalf("want 2 full batches then 1 that slept, got %d calls", n)
		}
	})

	t.Run("WakeCutsTheSleepShort", func(t *testing.T) {
		t.Parallel()
		wake := make(chan struct{})
		ran := make(chan struct{}, 10)
		l := &Loop{
			Name: "Test", Interval: time.Hour, Wake: wake, Logger: slog.New(slog.DiscardHandler),
			RunOnce: func(context.Context) (bool, error) { ran <- struct{}{}; return false, nil },
		}
		l.Start(context.Background())
		defer l.Stop()
		<-ran
		wake <- struct{}{}
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("want a second batch after the wake-up")
		}
	})

	t.Run("ErrorsAreLoggedAndTheLoopGoesOn", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		second := make(chan struct{})
		l := &Loop{
			Name: "Test", Interval: time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			RunOnce: func(context.Context) (bool, error) {
				if calls.Add(1) == 2 {
					close(second)
				}
				return false, errors.New("boom")
			},
		}
		l.Start(context.Background())
		<-second
		l.Stop()
	})

	t.Run("StopWaitsForTheBatchInProgress", func(t *testing.T) {
		t.Parallel()
		started, finished := make(chan struct{}), atomic.Bool{}
		l := &Loop{
			Name: "Test", Interval: time.Hour, Logger: slog.New(slog.DiscardHandler),
			RunOnce: func(ctx context.Context) (bool, error) {
				close(started)
				<-ctx.Done()
				finished.Store(true)
				return false, ctx.Err()
			},
		}
		l.Start(context.Background())
		<-started
		l.Stop()
		if !finished.Load() {
			t.Fatal("Stop returned before the batch ended")
		}
	})
}
