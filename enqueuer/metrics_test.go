package enqueuer_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

func TestMetrics(t *testing.T) {
	t.Parallel()

	// Each pass adds what it committed; a batch that rolls back adds nothing.
	t.Run("CountsEnqueuedAndSetAsideJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := metrics.NewEnqueuer(nil)
		e := b.enqueuer(t, decodeWithPriority9For(2), enqueuer.Config{Metrics: m})
		requireCounts := func(enqueued, setAside float64) {
			t.Helper()
			if got := testutil.ToFloat64(m.EnqueuedJobs); got != enqueued {
				t.Errorf("rocketrides_enqueued_jobs_total = %v, want %v", got, enqueued)
			}
			if got := testutil.ToFloat64(m.SetAsideJobs); got != setAside {
				t.Errorf("rocketrides_staged_jobs_set_aside_total = %v, want %v", got, setAside)
			}
		}

		b.stageMany(t, 3)
		runOnce(t, e, enqueuer.Result{Enqueued: 2, Failed: 1})
		requireCounts(2, 1)
		runOnce(t, e, enqueuer.Result{})
		requireCounts(2, 1)

		b.stageMany(t, 1)
		if _, err := b.pool.Exec(t.Context(), `
			CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'river_job refuses inserts'; END $$;
			CREATE TRIGGER refuse BEFORE INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
			t.Fatal(err)
		}
		if _, err := e.RunOnce(t.Context()); err == nil {
			t.Fatal("want the batch failed")
		}
		requireCounts(2, 1)
	})

	// The backlog gauges read staged_jobs as it is (models.StagedJobCountBacklog): what waits,
	// what was set aside, and how long the oldest has waited.
	t.Run("StagedJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		got, err := models.StagedJobCountBacklog(t.Context(), b.pool)
		if err != nil {
			t.Fatal(err)
		}
		if *got != (models.StagedJobBacklog{}) {
			t.Fatalf("want all zeros for an empty table, got %+v", *got)
		}

		// An hour-old job of a name this release does not know waits too, and is the oldest.
		if _, err := b.pool.Exec(t.Context(), `
			INSERT INTO staged_jobs (created_at, job_name, job_args, failed_at, last_error, user_id) VALUES
				(now() - interval '1 hour', 'newer_job', '{}', NULL, NULL, $2),
				(now() - interval '2 hours', $1, '{}', now(), 'refused', $2)`, testJobName, testUserID); err != nil {
			t.Fatal(err)
		}
		b.stageMany(t, 2)

		got, err = models.StagedJobCountBacklog(t.Context(), b.pool)
		if err != nil {
			t.Fatal(err)
		}
		if got.Pending != 3 || got.Failed != 1 {
			t.Errorf("want 3 pending and 1 failed, got %+v", *got)
		}
		if age := got.OldestPendingAge; age < time.Hour || age > time.Hour+time.Minute {
			t.Errorf("want the oldest pending job an hour old, not the older failed one; got %s", age)
		}
	})
}
