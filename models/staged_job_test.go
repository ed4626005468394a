package models_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/models"
)

// TestStagedJobLockByRiderFindsNone: with no job of the names asked for, the rider-by-rider lock
// returns no jobs and no error, as StagedJobLockBatch does, and leaves the other job alone.
func TestStagedJobLockByRiderFindsNone(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO staged_jobs (job_name, job_args, user_id) VALUES ('newer_job', '{}', 1)`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	jobs, err := models.StagedJobLockByRider(t.Context(), tx, []string{"send_ride_receipt"}, 10)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("want no jobs and no error, got %v, %v", jobs, err)
	}
}

// TestStagedJobMarkFailed: the error a job is set aside with always fits its column, whose CHECK
// wants 1 to 2,000 characters of valid text, and a job that does not exist is ErrNotFound.
func TestStagedJobMarkFailed(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, lastError, want string
	}{
		{"Plain", "error decoding staged job: bad args", "error decoding staged job: bad args"},
		{"OnlyNUL", "\x00", "unknown error"},
		{"LongWithInvalidUTF8", "\xc3" + strings.Repeat("é", 2500), "\uFFFD" + strings.Repeat("é", 1999)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.NewPool(t)
			var id int64
			if err := pool.QueryRow(t.Context(), `INSERT INTO staged_jobs (job_name, job_args, user_id)
				VALUES ('send_ride_receipt', '{}', 1) RETURNING id`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if err := models.StagedJobMarkFailed(t.Context(), pool, id, tt.lastError); err != nil {
				t.Fatal(err)
			}
			failed, err := models.StagedJobListFailed(t.Context(), pool, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(failed) != 1 || failed[0].ID != id || failed[0].FailedAt == nil || *failed[0].LastError != tt.want ||
				!utf8.ValidString(*failed[0].LastError) {
				t.Fatalf("want job %d set aside with %q, got %+v", id, tt.want, failed)
			}
			if err := models.StagedJobMarkFailed(t.Context(), pool, id+1, "gone"); !errors.Is(err, models.ErrNotFound) {
				t.Fatalf("want ErrNotFound for a job that does not exist, got %v", err)
			}
		})
	}
}
