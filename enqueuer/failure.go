package enqueuer

import (
	"github.com/rocketrides/rocketrides/models"
)

// failure is a staged job that River will never take, and why. RunOnce sets it aside: the row
// stays in staged_jobs with failed_at and last_error set (migration 00005), in the transaction
// that enqueues the rest of its batch, and every enqueuer skips it from then on.
//
// The row stays until a person deals with it; nothing deletes it, as it may be a receipt that a
// rider is owed. Besides the log line of RunOnce at the time and the reminders of
// reportStranded, an operator finds such rows with `go run ./cmd/admin list-failed-jobs` (as
// staged:ID, beside the jobs River discarded) and, once the cause is fixed (a worker for the job
// name deployed, the arguments corrected), hands one back to the enqueuer with
// `go run ./cmd/admin retry-job staged:ID`, which clears the mark and wakes the enqueuer; or
// deletes the row if the job is not wanted any more.
//
// Why not in River, as a cancelled job? River's job cleaner deletes cancelled jobs after a day
// (CancelledJobRetentionPeriod), so a job that could not be enqueued on a Friday night would be
// gone, without a trace, by Monday. staged_jobs is ours, and keeps what it is given.
type failure struct {
	stagedJob *models.StagedJob
	err       error
}
