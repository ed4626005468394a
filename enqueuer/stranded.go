package enqueuer

import (
	"context"
	"log/slog"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// strandedReportInterval is how often RunOnce counts the staged rows it leaves behind and warns
// about them. A rolling deploy is usually over in a few minutes, so it leaves a warning or two
// about jobs of a new name; a row that waits for longer, or one set aside, is a problem a person
// should hear about a dozen times an hour, not every second.
const strandedReportInterval = 5 * time.Minute

// reportStranded warns, at the first pass and then every strandedReportInterval, about the
// staged jobs that this enqueuer does not take: those of job names it does not know, and those
// set aside as failed. Counting runs outside the batch's transaction, and its failure is logged
// but fails no pass: it is a reminder, not the work.
func (e *Enqueuer) reportStranded(ctx context.Context) {
	now := time.Now()
	e.reportMu.Lock()
	due := !now.Before(e.nextStrandedScan)
	if due {
		e.nextStrandedScan = now.Add(strandedReportInterval)
	}
	e.reportMu.Unlock()
	if !due {
		return
	}

	stranded, err := models.StagedJobCountStranded(ctx, e.pool, e.config.JobNames)
	if err != nil {
		e.logger.WarnContext(ctx, "Enqueuer: could not count the staged jobs left behind", slog.String("error", err.Error()))
		return
	}
	if stranded.UnknownName > 0 {
		e.logger.WarnContext(ctx, "Enqueuer: leaving staged jobs of job names this release does not know; a release that knows them will enqueue them",
			slog.Int64("num_unknown", stranded.UnknownName), slog.Any("known_job_names", e.config.JobNames))
	}
	if stranded.Failed > 0 {
		e.logger.WarnContext(ctx, "Enqueuer: staged jobs set aside as failed wait for a person",
			slog.Int64("num_failed", stranded.Failed),
			slog.String("list_with", "go run ./cmd/admin list-failed-jobs"))
	}
}
