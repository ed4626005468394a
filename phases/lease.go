package phases

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// keepLease renews the lease on r's key every third of Config.LockLease until the returned
// function stops it; runPhases starts it once the first atomic phase has committed the lock. A
// renewal that fails for want of a database is tried again at the next tick; one that
// finds the key taken over stops renewing. Neither stops the request: if another request took
// its key over, the request's next atomic phase finds a newer lock generation and commits
// nothing (ErrLockLost), and that is where it ends.
func (e *Executor) keepLease(ctx context.Context, r *run) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mu := r.mu // read here, before any atomic phase rewrites the run (with the same mutex)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(e.config.LockLease / 3)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if !e.renewLease(ctx, r, mu) {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// renewLease renews the lease on r's key once, and reports whether to go on renewing. mu is r's.
func (e *Executor) renewLease(ctx context.Context, r *run, mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	if r.key == nil || r.lockGeneration == 0 {
		return true // no lock yet
	}
	if r.key.RecoveryPoint == models.RecoveryPointFinished {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, e.config.LockLease/3)
	defer cancel()
	held, err := models.IdempotencyKeyRenewLease(ctx, e.pool, r.key.UserID, r.key.ID, r.lockGeneration, e.config.LockLease)
	if err != nil {
		e.logger.WarnContext(ctx, "Phases: failed to renew the lease of an idempotency key",
			slog.Int64("idempotency_key_id", r.key.ID), slog.String("error", err.Error()))
		return true
	}
	if !held {
		e.logger.WarnContext(ctx, "Phases: lost the lease of an idempotency key to another request",
			slog.Int64("idempotency_key_id", r.key.ID), slog.Int64("lock_generation", r.lockGeneration))
	}
	return held
}
