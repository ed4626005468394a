// Package reaper deletes idempotency keys once they are too old to matter. Clients retry a
// request for minutes, the completer for hours; after ReapAfter nobody will, and the keys would
// otherwise pile up for ever. A key that never finished is not simply dropped: it is recorded in
// abandoned_requests first, for a human, because it may stand for a ride that was booked, or even
// charged, without the rider ever hearing of it.
package reaper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/maintenance"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// Config tunes the reaper. The zero value of each field means its default.
type Config struct {
	// BatchSize bounds the keys one pass deletes, and so how long its transaction holds their
	// row locks. Default BatchSizeDefault.
	BatchSize int

	// ReapAfter is the age at which a key is deleted. Default ReapAfterDefault.
	ReapAfter time.Duration

	// Interval is the sleep between passes that found less than a full batch. Default
	// IntervalDefault.
	Interval time.Duration

	// Metrics counts the keys each pass reaps. Default: a set that no registry holds.
	Metrics *metrics.Reaper
}

// Defaults of Config.
const (
	// BatchSizeDefault keeps a pass's transaction, and its row locks, short.
	BatchSizeDefault = 1000

	// ReapAfterDefault is models.IdempotencyKeyRetention, which the completer keeps clear of.
	ReapAfterDefault = models.IdempotencyKeyRetention

	// IntervalDefault: keys come of age slowly, and a minute late is no harm.
	IntervalDefault = time.Minute
)

func (c Config) withDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.ReapAfter = cmp.Or(c.ReapAfter, ReapAfterDefault)
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	if c.Metrics == nil {
		c.Metrics = metrics.NewReaper(nil)
	}
	return c
}

// Reaper is the maintenance service that deletes old keys. Any number may run at once: each
// pass locks the keys it takes and skips those another pass holds. Stop lets the pass in
// progress commit or roll back whole.
type Reaper struct {
	maintenance.StartStop

	config Config
	logger *slog.Logger
	pool   *pgxpool.Pool

	// keys says whether idempotency_keys is distributed by rider (Citus).
	keys models.DistributedTable
}

// New returns a Reaper working on pool.
func New(pool *pgxpool.Pool, logger *slog.Logger, config Config) *Reaper {
	r := &Reaper{
		config: config.withDefaults(),
		logger: logger,
		pool:   pool,
		keys:   models.DistributedTable{Table: "idempotency_keys"},
	}
	r.StartStop = maintenance.NewStartStop(&maintenance.Loop{
		Name: "Reaper",
		RunOnce: func(ctx context.Context) (bool, error) {
			res, err := r.RunOnce(ctx)
			if err != nil {
				return false, err
			}
			return res.Reaped == r.config.BatchSize, nil
		},
		Interval: r.config.Interval,
		Logger:   logger,
	})
	return r
}

// Result counts what one pass did.
type Result struct {
	// Reaped counts the keys deleted, finished or not.
	Reaped int `json:"reaped"`

	// Abandoned counts those of them that never finished, and were recorded in
	// abandoned_requests before they were deleted.
	Abandoned int `json:"abandoned"`
}

// RunOnce reaps one batch in one transaction: it takes the oldest keys past ReapAfter, records
// the unfinished ones as abandoned requests, and deletes them all. Record and deletion commit
// together, so a key is never deleted unrecorded, nor recorded twice by two reapers.
func (r *Reaper) RunOnce(ctx context.Context) (*Result, error) {
	var res *Result
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		res, err = r.reap(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reaping idempotency keys: %w", err)
	}
	// Counted once committed: a pass that rolled back reaped nothing.
	r.config.Metrics.Keys.WithLabelValues(metrics.ReaperFinished).Add(float64(res.Reaped - res.Abandoned))
	r.config.Metrics.Keys.WithLabelValues(metrics.ReaperAbandoned).Add(float64(res.Abandoned))
	if res.Reaped > 0 {
		r.logger.InfoContext(ctx, "Reaper: reaped keys",
			slog.Int("num_reaped", res.Reaped),
			slog.Int("num_abandoned", res.Abandoned))
	}
	if res.Abandoned > 0 {
		// Someone has to look at these; `admin list-abandoned` shows them.
		r.logger.WarnContext(ctx, "Reaper: recorded unfinished requests as abandoned",
			slog.Int("num_abandoned", res.Abandoned))
	}
	return res, nil
}

func (r *Reaper) reap(ctx context.Context, tx pgx.Tx) (*Result, error) {
	distributed, err := r.keys.Is(ctx, tx)
	if err != nil {
		return nil, err
	}
	var keys []*models.IdempotencyKey
	if distributed {
		keys, err = models.IdempotencyKeyListReapableByRider(ctx, tx, r.config.ReapAfter, r.config.BatchSize)
	} else {
		keys, err = models.IdempotencyKeyListReapableForUpdate(ctx, tx, r.config.ReapAfter, r.config.BatchSize)
	}
	if err != nil {
		r.keys.Forget() // found out again next pass: the tables may have been laid out for Citus since
		return nil, err
	}

	res := &Result{}
	for _, key := range keys {
		if key.RecoveryPoint == models.RecoveryPointFinished {
			continue
		}
		var rideID *int64
		id, err := models.RideIDOfKey(ctx, tx, key.UserID, key.ID)
		switch {
		case err == nil:
			rideID = &id
		case !errors.Is(err, models.ErrNotFound):
			return nil, err
		}
		if _, err := models.AbandonedRequestInsertFromKey(ctx, tx, key, models.AbandonedReasonReapedUnfinished, rideID); err != nil {
			return nil, err
		}
		res.Abandoned++
	}

	if len(keys) == 0 {
		return res, nil
	}
	if distributed {
		if err := models.IdempotencyKeyClearReferences(ctx, tx, keys); err != nil {
			return nil, err
		}
	}
	res.Reaped, err = models.IdempotencyKeyDeleteKeys(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	return res, nil
}
