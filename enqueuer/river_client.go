package enqueuer

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// InsertNotifyCooldown is the shortest time between two of the enqueuer's notifications to
// River's workers that a queue has new jobs.
//
// River's client notifies at most once per queue per FetchCooldown (100 ms by default), and it
// counts from the insert, not from the commit. With that default, a batch inserted within
// 100 ms of the previous one notified no worker: the worker woken by the previous batch had
// fetched by the time this one committed, and this batch's jobs waited for a later batch's
// notification or, when none came, for the worker's next poll, up to a second later. Of ten
// rides booked back to back, one receipt was notified (issue 13).
//
// The enqueuer inserts once per batch, and a batch with jobs in it is several round trips and
// a commit, a millisecond or more: at River's minimum, 1 ms, every batch notifies. (Should two
// batches come closer still, the second's jobs wait for the poll, as after a lost notification.)
// The notification is one statement in the batch's own transaction, and none is sent while
// there are no jobs.
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
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	return client, nil
}
