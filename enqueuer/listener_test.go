package enqueuer_test

import (
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/enqueuer"
)

// pollIntervalNever is a poll interval no test outlasts: a job that arrives was woken for.
const pollIntervalNever = time.Hour

// arrivalTimeout is how long a test waits for a job to reach River. A notification takes
// milliseconds; the margin is for a loaded CI machine, and still far below pollIntervalNever.
const arrivalTimeout = 30 * time.Second

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("WakesOnNotification", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{PollInterval: pollIntervalNever})
		if err := e.Start(t.Context()); err != nil {
			t.Fatalf("error starting: %s", err)
		}

		for i := range 3 {
			staged := time.Now()
			b.stage(t, testJobName, map[string]int{"n": i})
			b.waitForRiverJobs(t, i+1)
			t.Logf("job %d reached River %s after it was staged", i+1, time.Since(staged))
		}
	})

	t.Run("DrainsJobsStagedBeforeStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.stageMany(t, 1500)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{PollInterval: pollIntervalNever})
		if err := e.Start(t.Context()); err != nil {
			t.Fatalf("error starting: %s", err)
		}
		// A full batch is followed at once by the next, without waiting to be woken.
		b.waitForRiverJobs(t, 1500)
	})

	t.Run("PollsWithoutNotification", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{PollInterval: 50 * time.Millisecond})
		if err := e.Start(t.Context()); err != nil {
			t.Fatalf("error starting: %s", err)
		}
		b.stageQuietly(t, testJobName, map[string]int{"n": 1})
		b.waitForRiverJobs(t, 1)
	})

	t.Run("ListensAgainAfterLosingConnection", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{PollInterval: pollIntervalNever})
		if err := e.Start(t.Context()); err != nil {
			t.Fatalf("error starting: %s", err)
		}
		first := b.listenerPIDs(t)
		if len(first) != 1 {
			t.Fatalf("want one listening connection, got %d", len(first))
		}
		if _, err := b.pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, first[0]); err != nil {
			t.Fatal(err)
		}
		// Staged while nobody listens: found when the enqueuer listens again.
		b.stage(t, testJobName, map[string]int{"n": 1})
		b.waitForRiverJobs(t, 1)

		waitFor(t, arrivalTimeout, "listening again", func() bool {
			pids := b.listenerPIDs(t)
			return len(pids) == 1 && pids[0] != first[0]
		})
		b.stage(t, testJobName, map[string]int{"n": 2})
		b.waitForRiverJobs(t, 2)
	})

	t.Run("StopClosesListeningConnection", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{PollInterval: pollIntervalNever})
		if err := e.Start(t.Context()); err != nil {
			t.Fatalf("error starting: %s", err)
		}
		if pids := b.listenerPIDs(t); len(pids) != 1 {
			t.Fatalf("want one listening connection, got %d", len(pids))
		}

		e.Stop()

		// pgxpool takes a released connection back in a goroutine of its own, hence the waits.
		waitFor(t, arrivalTimeout, "every connection back in the pool", func() bool { return b.pool.Stat().AcquiredConns() == 0 })
		waitFor(t, arrivalTimeout, "listening connection closed", func() bool { return len(b.listenerPIDs(t)) == 0 })
		e.Stop() // a second Stop is harmless
	})
}

// waitForRiverJobs waits until River holds n jobs.
func (b *testBundle) waitForRiverJobs(t *testing.T, n int) {
	t.Helper()
	waitFor(t, arrivalTimeout, "jobs in River", func() bool { return b.count(t, "river_job") == n })
}

// listenerPIDs returns the server processes of the connections listening for staged jobs.
func (b *testBundle) listenerPIDs(t *testing.T) []int32 {
	t.Helper()
	var pids []int32
	err := b.pool.QueryRow(t.Context(), `
		SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN "staged_jobs"'`).Scan(&pids)
	if err != nil {
		t.Fatalf("error listing listeners: %s", err)
	}
	return pids
}
