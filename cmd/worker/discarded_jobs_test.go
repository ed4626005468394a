package main

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/phases"
)

// TestKeepsDiscardedJobs runs the worker over three receipt jobs that ended a month ago: one
// completed, one discarded and one cancelled. River's job cleaner deletes the completed one,
// which shows that it ran, and keeps the other two, receipts riders never got, for a person to
// act on.
func TestKeepsDiscardedJobs(t *testing.T) {
	t.Parallel()
	w := setup(t)
	discardedID := w.jobID
	client, err := river.NewClient(riverpgxv5.New(w.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(t.Context(), jobargs.SendRideReceipt{
		RideID: w.ride.ID + 1, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	completedID := res.Job.ID
	res, err = client.Insert(t.Context(), jobargs.SendRideReceipt{
		RideID: w.ride.ID + 2, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancelledID := res.Job.ID
	if _, err := w.pool.Exec(t.Context(), `
		UPDATE river_job
		SET state = CASE id WHEN $1 THEN 'discarded' WHEN $3 THEN 'cancelled' ELSE 'completed' END::river_job_state,
			attempt = 1, attempted_at = now() - interval '30 days', finalized_at = now() - interval '30 days'
		WHERE id IN ($1, $2, $3)`, discardedID, completedID, cancelledID); err != nil {
		t.Fatal(err)
	}
	jobExists := func(id int64) bool {
		var exists bool
		if err := w.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM river_job WHERE id = $1)`, id).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		return exists
	}

	worker := proctest.Start(t, proctest.Build(t, "worker"), []string{"DATABASE_URL=" + w.url})
	deadline := time.Now().Add(30 * time.Second)
	for jobExists(completedID) {
		if time.Now().After(deadline) {
			t.Fatalf("River's job cleaner did not delete the month-old completed job within 30s:\n%s", worker.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !jobExists(discardedID) || !jobExists(cancelledID) {
		t.Fatalf("want the discarded and cancelled jobs kept, got discarded kept %t, cancelled kept %t",
			jobExists(discardedID), jobExists(cancelledID))
	}
	worker.Terminate(t, 10*time.Second)
}
