package enqueuer

import (
	"github.com/rocketrides/rocketrides/models"
)

// failure is a staged job that River will never take, and why. RunOnce sets it aside in
// staged_jobs (failed_at, last_error; migration 00005), in the transaction that enqueues the rest
// of its batch, rather than in River as a cancelled job: River's job cleaner deletes those after
// a day (CancelledJobRetentionPeriod), and this may be a receipt a rider is owed. See doc.go for
// how a person finds it and hands it back.
type failure struct {
	stagedJob *models.StagedJob
	err       error
}
