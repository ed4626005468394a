package enqueuer_test

import (
	"slices"
	"testing"

	"github.com/rocketrides/rocketrides/models"
)

// On Citus the enqueuer locks staged jobs rider by rider (models.StagedJobLockByRider), since a
// FOR UPDATE may not span shards. It runs on a single Postgres too, which is where this tests it:
// oldest first across riders, only the job names asked for, and never a job another enqueuer's
// transaction holds.
func TestStagedJobLockByRider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stageFor := func(userID int64, name string) int64 {
		var id int64
		if err := b.pool.QueryRow(t.Context(), `INSERT INTO staged_jobs (job_name, job_args, user_id)
			VALUES ($1, '{}', $2) RETURNING id`, name, userID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first, second, other, third := stageFor(1, testJobName), stageFor(2, testJobName), stageFor(1, "newer_job"), stageFor(1, testJobName)

	held, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(t.Context()) }()
	if _, err := held.Exec(t.Context(), `SELECT 1 FROM staged_jobs WHERE user_id = 2 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	jobs, err := models.StagedJobLockByRider(t.Context(), tx, []string{testJobName}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if want := []int64{first, third}; !slices.Equal(ids, want) {
		t.Fatalf("want jobs %v (not %d, held elsewhere, nor %d, another name), got %v", want, second, other, ids)
	}
}
