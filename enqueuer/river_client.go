package enqueuer

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/tracing"
)

// InsertNotifyCooldown is the shortest time between two of the enqueuer's notifications to
// River's workers that a queue has new jobs. River's default of 100 ms, counted from the insert
// rather than the commit, would leave most back-to-back receipts waiting for a poll
// (docs/performance.md measures it). A batch takes a millisecond or more, so at River's minimum,
// 1 ms, every batch notifies; should two come closer still, the second's jobs wait for the poll,
// as after a lost notification. None is sent while there are no jobs.
const InsertNotifyCooldown = river.FetchCooldownMin

// NewRiverClient returns the River client the enqueuer inserts through: insert-only, so
// without Queues it works no jobs and without Workers it checks no kinds against a bundle of
// workers (the DecodeFunc and Config.JobNames say which kinds exist).
func NewRiverClient(pool *pgxpool.Pool, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		// An insert-only client fetches nothing: its FetchCooldown only spaces the insert
		// notifications it sends.
		FetchCooldown: InsertNotifyCooldown,
		Logger:        logger,
		Plugins:       tracing.RiverPlugins(), // an insert span per batch when tracing
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	return client, nil
}
