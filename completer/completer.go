// Package completer finishes ride requests that their clients abandoned: the app was closed, the
// phone lost its signal, or the API process died mid-request, and nobody is going to retry. Left
// alone, such a request could sit with a ride booked and a card charged but no receipt, or with a
// ride booked and never charged. The completer pushes each one through the very phases the API
// runs, from the recovery point it stopped at, as if its client had retried.
package completer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/maintenance"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// Config tunes the completer. The zero value of each field means its default.
type Config struct {
	// BatchSize bounds the keys one pass takes on. Keys are pushed one after another, and a
	// key's run may wait on Stripe for up to its timeout, so a pass lasts at most about
	// BatchSize times that. Default BatchSizeDefault.
	BatchSize int

	// MinAge is how old a key must be before its client counts as gone. Default MinAgeDefault.
	MinAge time.Duration

	// ReapAfter is the reaper's ReapAfter, the age at which it deletes keys. The completer takes
	// on no key within ReapMargin of it; older ones are left to the reaper, which records them
	// for a human. Were the reaper to delete a key while its run here was about to start, the
	// run's first phase would find no key and start the request afresh under a new one: a
	// second ride, and a second charge. Keeping the two apart in time rules that out. Default
	// models.IdempotencyKeyRetention, the reaper's default.
	ReapAfter time.Duration

	// IdleFor is how long a key must not have been run before it is taken on. Default
	// IdleForDefault.
	IdleFor time.Duration

	// Interval is the sleep between passes that found less than a full batch. Default
	// IntervalDefault.
	Interval time.Duration

	// Metrics counts the keys each pass runs, by result. Default: a set that no registry holds.
	Metrics *metrics.Completer
}

// Defaults of Config.
const (
	// BatchSizeDefault keeps a pass, each of whose keys may wait out a Stripe timeout, well
	// under ReapMargin.
	BatchSizeDefault = 100

	// MinAgeDefault: a client retries for a while by itself (the app's backoff), and racing it
	// for the key would only make it see 409s.
	MinAgeDefault = 5 * time.Minute

	// IdleForDefault keeps a key that just failed from being hammered, and a live client
	// retrying it from being raced.
	IdleForDefault = 60 * time.Second

	// IntervalDefault: an abandoned request is finished within seconds of coming of age.
	IntervalDefault = 5 * time.Second
)

// ReapMargin is how long before the reaper may delete a key the completer stops taking it on
// (see Config.ReapAfter). An hour is far more than a pass takes, even one whose every key waits
// out a Stripe timeout.
const ReapMargin = time.Hour

func (c Config) withDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.MinAge = cmp.Or(c.MinAge, MinAgeDefault)
	c.ReapAfter = cmp.Or(c.ReapAfter, models.IdempotencyKeyRetention)
	c.IdleFor = cmp.Or(c.IdleFor, IdleForDefault)
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	if c.Metrics == nil {
		c.Metrics = metrics.NewCompleter(nil)
	}
	return c
}

// maxAge is the age past which the completer leaves a key to the reaper.
func (c Config) maxAge() time.Duration { return c.ReapAfter - ReapMargin }

// Completer is the maintenance service that finishes abandoned requests. Any number of them may
// run at once, beside any number of API processes: each key is taken with its own lock, the
// same way a request takes it, so two runs never work one key. Stop leaves a key it interrupts
// unlocked at its recovery point, for the next pass.
type Completer struct {
	maintenance.StartStop

	config   Config
	executor *phases.Executor
	logger   *slog.Logger
	pool     *pgxpool.Pool

	// beforeComplete, nil outside tests, runs between listing the keys and running each.
	beforeComplete func()
}

// New returns a Completer that finds keys in pool and runs them with executor.
func New(pool *pgxpool.Pool, executor *phases.Executor, logger *slog.Logger, config Config) *Completer {
	c := &Completer{
		config:   config.withDefaults(),
		executor: executor,
		logger:   logger,
		pool:     pool,
	}
	c.StartStop = maintenance.NewStartStop(&maintenance.Loop{
		Name:     "Completer",
		RunOnce:  c.runLoopOnce,
		Interval: c.config.Interval,
		Logger:   logger,
	})
	return c
}

// Result counts what one pass did with the keys it found.
type Result struct {
	// Succeeded counts keys the pass finished: they now hold a stored response, a 201 or a
	// final refusal such as a declined card's 402. Either way the request is over.
	Succeeded int `json:"succeeded"`

	// Failed counts keys whose run stopped on an error. They stay unlocked at the recovery
	// point they reached, with the error in last_error, for a later pass.
	Failed int `json:"failed"`

	// StripeEventsApplied counts the Stripe events kept for a charge that the pass applied to
	// the ride that records it (see phases.ApplyKeptStripeEvents).
	StripeEventsApplied int `json:"stripe_events_applied,omitempty"`
}

// RunOnce takes on one batch of abandoned keys and pushes each to completion.
//
// Unlike the other maintenance services, a pass is not one transaction, and cannot be: each
// key runs through the phases' own atomic transactions, and its charge is a Stripe call that no
// transaction may span. The unit of atomicity is the phase. What makes the pass safe is the
// key's lock, taken in the first phase as every request takes it; the batch itself is only a
// list of candidates, read without locks.
//
// Keys found to be in use when their turn comes (a client or another completer took the lock
// since the list was read), or already finished by someone else, count as neither succeeded
// nor failed: this pass did nothing with them, and whoever holds them carries on.
func (c *Completer) RunOnce(ctx context.Context) (*Result, error) {
	res, _, err := c.runOnce(ctx)
	return res, err
}

// runLoopOnce adapts RunOnce to the loop, which goes again at once after a full batch. Only a
// batch that finished something counts as full: a batch of failures is most likely an outage
// (Stripe down, say), and going again at once would only hit it harder.
func (c *Completer) runLoopOnce(ctx context.Context) (bool, error) {
	res, found, err := c.runOnce(ctx)
	if err != nil {
		return false, err
	}
	return found == c.config.BatchSize && res.Succeeded > 0, nil
}

func (c *Completer) runOnce(ctx context.Context) (*Result, int, error) {
	keys, err := models.IdempotencyKeyListIdleUnfinished(ctx, c.pool, models.IdempotencyKeyListIdleUnfinishedParams{
		MinAge:  c.config.MinAge,
		MaxAge:  c.config.maxAge(),
		IdleFor: c.config.IdleFor,
		Limit:   c.config.BatchSize,
	})
	if err != nil {
		return nil, 0, err
	}

	res := &Result{}
	// Stripe events kept for a charge that a ride records by now, but that its record did not
	// see (on Citus, or a charge the release before recorded; see phases.ApplyKeptStripeEvents),
	// as young as the keys taken on.
	if res.StripeEventsApplied, err = c.executor.ApplyKeptStripeEvents(ctx, c.config.maxAge(), c.config.BatchSize); err != nil {
		c.logger.WarnContext(ctx, "Completer: failed to apply kept Stripe events; left for the next pass",
			slog.Int("num_applied", res.StripeEventsApplied), slog.String("error", err.Error()))
	} else if res.StripeEventsApplied > 0 {
		c.logger.InfoContext(ctx, "Completer: applied kept Stripe events", slog.Int("num_applied", res.StripeEventsApplied))
	}
	skipped := 0
	for _, key := range keys {
		if c.beforeComplete != nil {
			c.beforeComplete()
		}
		done, err := c.complete(ctx, key)
		// Counted key by key, as each key's phases commit on their own: a pass cut short by a
		// stop returns no Result, but what it did stays counted.
		switch {
		case ctx.Err() != nil:
			// Stopping: the key was unlocked where it stopped; the rest wait for the next pass.
			return nil, len(keys), fmt.Errorf("error completing idempotency keys: %w", ctx.Err())
		case errors.Is(err, phases.ErrKeyInUse), errors.Is(err, phases.ErrKeyNotFound), err == nil && !done:
			skipped++
		case err != nil:
			res.Failed++
			c.config.Metrics.Keys.WithLabelValues(metrics.CompleterFailed).Inc()
			c.logger.WarnContext(ctx, "Completer: key failed again; left for the next pass",
				slog.Int64("idempotency_key_id", key.ID),
				slog.String("recovery_point", string(key.RecoveryPoint)),
				slog.String("error", err.Error()))
		default:
			res.Succeeded++
			c.config.Metrics.Keys.WithLabelValues(metrics.CompleterSucceeded).Inc()
		}
	}

	if len(keys) > 0 {
		c.logger.InfoContext(ctx, "Completer: pushed keys",
			slog.Int("num_succeeded", res.Succeeded),
			slog.Int("num_failed", res.Failed),
			slog.Int("num_skipped", skipped))
	}
	return res, len(keys), nil
}

// complete runs key's request to its end as its client would have: as the key's user, with the
// stored parameters and origin IP. done is false when someone else had finished it meanwhile.
func (c *Completer) complete(ctx context.Context, key *models.IdempotencyKey) (done bool, err error) {
	ctx, span := tracing.StartResumption(ctx, key.UserID, key.IdempotencyKey, string(key.RecoveryPoint))
	defer func() { tracing.End(span, err) }()
	user, err := models.UserGetByID(ctx, c.pool, key.UserID)
	if err != nil {
		return false, err
	}
	outcome, err := c.executor.Resume(ctx, user, key)
	if err != nil {
		return false, fmt.Errorf("error completing idempotency key %d: %w", key.ID, err)
	}
	if !outcome.Replayed {
		c.logger.DebugContext(ctx, "Completer: finished key",
			slog.Int64("idempotency_key_id", key.ID),
			slog.String("from_recovery_point", string(key.RecoveryPoint)),
			slog.Int("status", outcome.StatusCode))
	}
	return !outcome.Replayed, nil
}
