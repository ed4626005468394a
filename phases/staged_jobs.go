package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// stageJob stages a job (a receipt) in staged_jobs, in the phase's transaction: the job exists
// if and only if the phase commits. The enqueuer hands it to River once it is committed, woken
// by runRequest through stagedJobsNotifier. The job carries the trace context of ctx's span,
// the request's, so that the enqueuer's hand-off and the worker's job join the request's trace;
// with tracing off it carries none, and staging it costs nothing more (tracing.Carrier).
func stageJob(ctx context.Context, tx *phaseTx, r *run, args interface{ Kind() string }) error {
	encoded, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("error encoding %s job: %w", args.Kind(), err)
	}
	models.StagedJobInsert(&tx.Writes, r.key.UserID, args.Kind(), encoded, tracing.Carrier(ctx))
	r.staged = true
	return nil
}

// stagedJobsNotifier wakes the enqueuer after a request committed staged jobs (a receipt): one
// NOTIFY on models.StagedJobsChannel, sent after the commit and outside the transaction, and
// coalesced, so that however many requests commit at once, at most one notification is in flight
// and one more waits.
//
// Outside the transaction, because a transaction that notifies takes a database-wide lock while
// it commits, which would queue every finishing ride's last commit behind the others'; and a
// notification sent inside a distributed transaction would reach only listeners on the node it
// ran on. A notification that is never sent (the process died right after the commit) costs
// only latency: the enqueuer polls as well.
type stagedJobsNotifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	once    sync.Once
	pending chan struct{} // holds one token while a notification waits to be sent
}

// stagedJobsNotifyTimeout bounds one notification; a database that does not answer it in time
// leaves the jobs to the enqueuer's poll.
const stagedJobsNotifyTimeout = 2 * time.Second

func newStagedJobsNotifier(pool *pgxpool.Pool, logger *slog.Logger) *stagedJobsNotifier {
	return &stagedJobsNotifier{pool: pool, logger: logger, pending: make(chan struct{}, 1)}
}

// poke asks for a notification after jobs were committed. It never blocks: a notification that
// is already waiting covers this commit too.
func (n *stagedJobsNotifier) poke() {
	n.once.Do(func() { go n.run() })
	select {
	case n.pending <- struct{}{}:
	default:
	}
}

// run sends a notification for each token, for the life of the process: the executor that owns it
// lives as long.
func (n *stagedJobsNotifier) run() {
	for range n.pending {
		ctx, cancel := context.WithTimeout(context.Background(), stagedJobsNotifyTimeout)
		if err := models.StagedJobsNotify(ctx, n.pool); err != nil {
			n.logger.WarnContext(ctx, "Phases: failed to wake the enqueuer; its poll will take the jobs",
				slog.String("error", err.Error()))
		}
		cancel()
	}
}
