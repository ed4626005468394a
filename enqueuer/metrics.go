package enqueuer

import (
	"context"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// StagedJobs reads what staged_jobs holds, for the backlog gauges that the process registers
// with metrics.RegisterStagedJobs. Any enqueuer reads the same table, so every one reports the
// whole backlog, its own rows or not.
func (e *Enqueuer) StagedJobs(ctx context.Context) (*metrics.StagedJobs, error) {
	b, err := models.StagedJobCountBacklog(ctx, e.pool)
	if err != nil {
		return nil, err
	}
	return &metrics.StagedJobs{
		Pending:                 b.Pending,
		Failed:                  b.Failed,
		OldestPendingAgeSeconds: b.OldestPendingAge.Seconds(),
	}, nil
}
