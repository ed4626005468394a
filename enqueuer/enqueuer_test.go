package enqueuer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
)

func TestRunOnce(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesStagedReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})
		want := jobargs.SendRideReceipt{RideID: 7, UserID: 3, Amount: 2000, Currency: "usd"}
		b.stage(t, jobargs.SendRideReceiptKind, want)

		runOnce(t, e, enqueuer.Result{Enqueued: 1})

		jobs := b.riverJobs(t)
		if len(jobs) != 1 {
			t.Fatalf("want 1 River job, got %d", len(jobs))
		}
		if jobs[0].Kind != jobargs.SendRideReceiptKind || jobs[0].State != "available" {
			t.Errorf("want an available %s job, got %s %s", jobargs.SendRideReceiptKind, jobs[0].State, jobs[0].Kind)
		}
		var got jobargs.SendRideReceipt
		if err := json.Unmarshal(jobs[0].Args, &got); err != nil || got != want {
			t.Errorf("want args %+v, got %s (%v)", want, jobs[0].Args, err)
		}
		if n := b.count(t, "staged_jobs"); n != 0 {
			t.Errorf("want no staged jobs left, got %d", n)
		}
	})

	// The staged row is deleted as its job reaches River; the job keeps when it was staged, for
	// the worker to measure a receipt's latency from.
	t.Run("RecordsWhenEachJobWasStaged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode := func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			return enqueuer.RawJobArgs{JobKind: jobName, Args: args}, &river.InsertOpts{Metadata: []byte(`{"decoder": "kept"}`)}, nil
		}
		e := b.enqueuer(t, decode, enqueuer.Config{})
		first := b.stage(t, testJobName, map[string]int{"n": 1})
		second := b.stage(t, testJobName, map[string]int{"n": 2})

		runOnce(t, e, enqueuer.Result{Enqueued: 2})

		jobs := b.riverJobs(t)
		for i, staged := range []*models.StagedJob{first, second} {
			metadata, err := json.Marshal(jobs[i].Metadata)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := jobargs.StagedAt(metadata)
			if !ok || !got.Equal(staged.CreatedAt) || jobs[i].Metadata["decoder"] != "kept" {
				t.Errorf("job %d: want metadata with the decoder's key and staged at %s, got %s", i+1, staged.CreatedAt, metadata)
			}
		}
	})

	t.Run("NothingStaged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		runOnce(t, b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{}), enqueuer.Result{})
		if n := b.count(t, "river_job"); n != 0 {
			t.Errorf("want no River jobs, got %d", n)
		}
	})

	t.Run("TakesOneBatchInStagedOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})
		b.stageMany(t, 1500)

		runOnce(t, e, enqueuer.Result{Enqueued: 1000})
		if n := b.count(t, "staged_jobs"); n != 500 {
			t.Fatalf("want 500 staged jobs left after a batch, got %d", n)
		}
		runOnce(t, e, enqueuer.Result{Enqueued: 500})
		runOnce(t, e, enqueuer.Result{})

		for i, j := range b.riverJobs(t) {
			if want := fmt.Sprintf(`{"n": %d}`, i+1); string(j.Args) != want {
				t.Fatalf("River job %d has args %s, want %s: jobs out of staged order", i+1, j.Args, want)
			}
		}
	})

	// The article's enqueuer deleted every staged row up to the largest id it had handed over,
	// and with it any row of a smaller id that committed after the batch was read.
	t.Run("KeepsJobCommittedAfterBatchRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})

		tx, err := b.pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		if _, err := tx.Exec(t.Context(), `INSERT INTO staged_jobs (job_name, job_args, user_id) VALUES ($1, '{"n": 1}', $2)`, testJobName, testUserID); err != nil {
			t.Fatal(err)
		}
		b.stage(t, testJobName, map[string]int{"n": 2}) // a larger id, committed first

		runOnce(t, e, enqueuer.Result{Enqueued: 1})
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		runOnce(t, e, enqueuer.Result{Enqueued: 1})

		if jobs := b.riverJobs(t); len(jobs) != 2 || string(jobs[0].Args) != `{"n": 2}` || string(jobs[1].Args) != `{"n": 1}` {
			t.Fatalf("want jobs 2 then 1 in River, got %+v", jobs)
		}
	})

	t.Run("SkipsJobLockedByAnotherEnqueuer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})
		locked := b.stage(t, testJobName, map[string]int{"n": 1})
		b.stage(t, testJobName, map[string]int{"n": 2})

		tx, err := b.pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		if _, err := tx.Exec(t.Context(), `SELECT 1 FROM staged_jobs WHERE id = $1 FOR UPDATE`, locked.ID); err != nil {
			t.Fatal(err)
		}

		runOnce(t, e, enqueuer.Result{Enqueued: 1}) // without waiting for the lock
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		runOnce(t, e, enqueuer.Result{Enqueued: 1})
		if n := b.count(t, "river_job"); n != 2 {
			t.Fatalf("want 2 River jobs, got %d", n)
		}
	})

	t.Run("SetsAsideUndecodableJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode := func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			if jobName == "poison" {
				return nil, nil, errors.New("no such job")
			}
			return enqueuer.DecodeRaw(jobName, args)
		}
		// Batches of 2, so that the first is all poison: it must not hold up the jobs behind it.
		e := b.enqueuer(t, decode, enqueuer.Config{BatchSize: 2, JobNames: []string{testJobName, "poison"}})
		for i, name := range []string{"poison", "poison", testJobName, "poison"} {
			b.stage(t, name, map[string]int{"n": i + 1})
		}

		runOnce(t, e, enqueuer.Result{Failed: 2})
		runOnce(t, e, enqueuer.Result{Enqueued: 1, Failed: 1})
		runOnce(t, e, enqueuer.Result{}) // the set-aside jobs are not taken again

		jobs := b.riverJobs(t)
		if len(jobs) != 1 || jobs[0].Kind != testJobName || jobs[0].State != "available" || string(jobs[0].Args) != `{"n": 3}` {
			t.Fatalf("want only the decodable job in River, available, got %+v", jobs)
		}
		// Set aside: kept in staged_jobs with their arguments and the reason, for a person.
		staged := b.stagedRows(t)
		if len(staged) != 3 {
			t.Fatalf("want the 3 poison jobs kept, got %+v", staged)
		}
		for i, j := range staged {
			if j.JobName != "poison" || !j.Failed || j.LastError == nil || !strings.Contains(*j.LastError, "no such job") {
				t.Errorf("want poison job %d marked failed with the decode error, got %+v", i, j)
			}
		}
		if want := []string{`{"n": 1}`, `{"n": 2}`, `{"n": 4}`}; staged[0].JobArgs != want[0] || staged[1].JobArgs != want[1] || staged[2].JobArgs != want[2] {
			t.Errorf("want the arguments kept as staged, got %+v", staged)
		}
		if lines := b.logs.lines("Enqueuer: set aside a staged job"); len(lines) != 3 {
			t.Errorf("want each set-aside job logged, got %q", lines)
		}
	})

	t.Run("SetsAsideJobRiverRefuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, decodeWithPriority9For(2), enqueuer.Config{})
		b.stageMany(t, 3)

		runOnce(t, e, enqueuer.Result{Enqueued: 2, Failed: 1})

		var args []string
		for _, j := range b.riverJobs(t) {
			args = append(args, string(j.Args))
		}
		if fmt.Sprint(args) != `[{"n": 1} {"n": 3}]` {
			t.Errorf("want jobs 1 and 3 in River, got %v", args)
		}
		staged := b.stagedRows(t)
		if len(staged) != 1 || staged[0].JobArgs != `{"n": 2}` || !staged[0].Failed || !strings.Contains(*staged[0].LastError, "priority") {
			t.Errorf("want job 2 kept, marked failed with River's reason, got %+v", staged)
		}
	})

	// A batch of one job that River refuses is set aside like the refused job of a longer batch.
	t.Run("SetsAsideLoneJobRiverRefuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, decodeWithPriority9For(1), enqueuer.Config{})
		b.stageMany(t, 1)

		runOnce(t, e, enqueuer.Result{Failed: 1})
		staged := b.stagedRows(t)
		if len(staged) != 1 || !staged[0].Failed || !strings.Contains(*staged[0].LastError, "priority") {
			t.Errorf("want the job kept, marked failed with River's reason, got %+v", staged)
		}
		if n := b.count(t, "river_job"); n != 0 {
			t.Errorf("want no River jobs, got %d", n)
		}
	})

	// A set-aside job is a receipt nobody has sent: nothing may delete it behind a person's
	// back, and clearing its mark hands it back to the enqueuer.
	t.Run("KeepsSetAsideJobUntilAPersonClearsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		broken := true
		decode := func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			if broken {
				// Long, and with a NUL: last_error must still fit its column.
				return nil, nil, errors.New("bad\x00 args: " + strings.Repeat("é", 3000))
			}
			return enqueuer.DecodeRaw(jobName, args)
		}
		e := b.enqueuer(t, decode, enqueuer.Config{})
		b.stageMany(t, 1)

		runOnce(t, e, enqueuer.Result{Failed: 1})
		for range 3 {
			runOnce(t, e, enqueuer.Result{})
		}
		staged := b.stagedRows(t)
		if len(staged) != 1 || !staged[0].Failed || !strings.HasPrefix(*staged[0].LastError, "error decoding staged job: bad args: éé") ||
			utf8.RuneCountInString(*staged[0].LastError) != 2000 {
			t.Fatalf("want the job kept with its error cut to 2000 characters, got %+v", staged)
		}

		broken = false
		if _, err := b.pool.Exec(t.Context(), `UPDATE staged_jobs SET failed_at = NULL, last_error = NULL`); err != nil {
			t.Fatal(err)
		}
		runOnce(t, e, enqueuer.Result{Enqueued: 1})
		if n := b.count(t, "staged_jobs"); n != 0 {
			t.Fatalf("want the job enqueued and gone from staged_jobs, %d left", n)
		}
	})

	// A rolling deploy: a newer API stages a job this enqueuer has no worker for. The job waits,
	// untouched, for an enqueuer that knows it, and does not hold up the jobs behind it.
	t.Run("LeavesJobsOfUnknownNamesStaged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// As jobargs.DecodeStagedJob: it knows its own jobs only.
		decode := func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			if jobName != testJobName {
				return nil, nil, fmt.Errorf("unknown job name %q", jobName)
			}
			return enqueuer.DecodeRaw(jobName, args)
		}
		older := b.enqueuer(t, decode, enqueuer.Config{BatchSize: 2, JobNames: []string{testJobName}})
		for i, name := range []string{"newer_job", "newer_job", "newer_job", testJobName, testJobName} {
			b.stage(t, name, map[string]int{"n": i + 1})
		}

		runOnce(t, older, enqueuer.Result{Enqueued: 2})
		runOnce(t, older, enqueuer.Result{})

		staged := b.stagedRows(t)
		if len(staged) != 3 {
			t.Fatalf("want the 3 newer jobs still staged, got %+v", staged)
		}
		for _, j := range staged {
			if j.JobName != "newer_job" || j.Failed || j.LastError != nil {
				t.Errorf("want the newer job untouched, got %+v", j)
			}
		}
		// Warned about once, with the count, not at every pass.
		lines := b.logs.lines("job names this release does not know")
		if len(lines) != 1 || !strings.Contains(lines[0], "num_unknown=3") {
			t.Errorf("want one warning counting 3 jobs, got %q", lines)
		}

		newer := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{JobNames: []string{testJobName, "newer_job"}})
		runOnce(t, newer, enqueuer.Result{Enqueued: 3})
		if n := b.count(t, "river_job"); n != 5 {
			t.Fatalf("want all 5 jobs in River, got %d", n)
		}
	})

	t.Run("RemindsOfSetAsideJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.stageMany(t, 1)
		runOnce(t, b.enqueuer(t, decodeWithPriority9For(1), enqueuer.Config{}), enqueuer.Result{Failed: 1})

		// A later process, say after a restart, reminds at its first pass too.
		runOnce(t, b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{}), enqueuer.Result{})
		lines := b.logs.lines("set aside as failed wait for a person")
		if len(lines) != 2 || !strings.Contains(lines[1], "num_failed=1") || !strings.Contains(lines[1], "admin list-failed-jobs") {
			t.Errorf("want a reminder from each enqueuer, counting the job and saying how to list it, got %q", lines)
		}
	})
	// River fails a whole InsertMany when two of its jobs share a unique key; the enqueuer must
	// neither block on such a batch nor set the duplicate aside.
	t.Run("MergesUniqueDuplicatesInOneBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode := func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			return enqueuer.RawJobArgs{JobKind: jobName, Args: args}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}, nil
		}
		e := b.enqueuer(t, decode, enqueuer.Config{})
		for _, n := range []int{1, 1, 2} {
			b.stage(t, testJobName, map[string]int{"n": n})
		}

		runOnce(t, e, enqueuer.Result{Enqueued: 3})

		jobs := b.riverJobs(t)
		if len(jobs) != 2 || string(jobs[0].Args) != `{"n": 1}` || string(jobs[1].Args) != `{"n": 2}` ||
			jobs[0].State != "available" || jobs[1].State != "available" {
			t.Fatalf("want one available job each for n 1 and 2, got %+v", jobs)
		}
	})

	t.Run("RollsBackWhenRiverInsertFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})
		b.stageMany(t, 3)
		// River's table refuses every insert, as a full disk or a broken schema would.
		b.refuse(t, "INSERT", "river_job", "river_job refuses inserts")

		if _, err := e.RunOnce(t.Context()); err == nil || !strings.Contains(err.Error(), "river_job refuses inserts") {
			t.Fatalf("want the insert's error, got %v", err)
		}
		if n := b.count(t, "staged_jobs"); n != 3 {
			t.Fatalf("want the 3 jobs still staged, got %d", n)
		}
		if n := b.count(t, "river_job"); n != 0 {
			t.Fatalf("want no River jobs, got %d", n)
		}

		if _, err := b.pool.Exec(t.Context(), `DROP TRIGGER refuse ON river_job`); err != nil {
			t.Fatal(err)
		}
		runOnce(t, e, enqueuer.Result{Enqueued: 3})
	})

	// River's insert and the staged rows' delete are one transaction: when the delete fails, no
	// job reached River, and the rows stay staged for the next pass. An enqueuer that inserted
	// into River outside that transaction would leave jobs in River that the next pass inserts
	// again.
	t.Run("RollsBackRiverWhenTheDeleteFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})
		b.stageMany(t, 3)
		b.refuse(t, "DELETE", "staged_jobs", "staged_jobs refuses deletes")

		if _, err := e.RunOnce(t.Context()); err == nil || !strings.Contains(err.Error(), "staged_jobs refuses deletes") {
			t.Fatalf("want the delete's error, got %v", err)
		}
		if n := b.count(t, "river_job"); n != 0 {
			t.Fatalf("want no River jobs, as the batch rolled back, got %d", n)
		}
		if n := b.count(t, "staged_jobs"); n != 3 {
			t.Fatalf("want the 3 jobs still staged, got %d", n)
		}
	})

	// An error that may pass must never set a valid job aside, even among jobs inserted one at a
	// time: the batch rolls back, and the next pass enqueues the job. Job 1 has an invalid
	// priority, which sends the batch down the one-at-a-time path; River's table then fails
	// once, for job 2, as a busy or restarting database does.
	for _, tt := range []struct {
		name  string
		fault string // PL/pgSQL that fails an insert
	}{
		{"StatementTimeout", `RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = '57014'`},
		{"LockTimeout", `RAISE EXCEPTION 'canceling statement due to lock timeout' USING ERRCODE = '55P03'`},
		{"Deadlock", `RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'`},
		{"SerializationFailure", `RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'`},
		{"DiskFull", `RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100'`},
		{"ConnectionFailure", `RAISE EXCEPTION 'connection failure' USING ERRCODE = '08006'`},
		{"ConnectionLost", `PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(10)`},
	} {
		t.Run("FailsTheBatchOnPassing"+tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			e := b.enqueuer(t, decodeWithPriority9For(1), enqueuer.Config{})
			b.stageMany(t, 3)
			// A sequence counts the inserts of job 2, as it is not rolled back with them.
			_, err := b.pool.Exec(t.Context(), `
				CREATE SEQUENCE fault_fires;
				CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF NEW.args->>'n' = '2' AND nextval('fault_fires') = 1 THEN `+tt.fault+`; END IF;
					RETURN NEW;
				END $$;
				CREATE TRIGGER fault BEFORE INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION fault()`)
			if err != nil {
				t.Fatal(err)
			}

			if res, err := e.RunOnce(t.Context()); err == nil {
				t.Fatalf("want the batch failed, got %+v", res)
			}
			if staged := b.stagedRows(t); len(staged) != 3 || staged[0].Failed || staged[1].Failed || staged[2].Failed {
				t.Fatalf("want the 3 jobs still staged and none set aside, got %+v", staged)
			}
			if n := b.count(t, "river_job"); n != 0 {
				t.Fatalf("want no River jobs, got %d", n)
			}

			// The trouble has passed: job 2 goes, and only job 1, which River refuses, stays. A
			// terminated backend may still be on its way out, holding the batch's row locks,
			// which the next pass would skip: wait until it let them go.
			b.waitStagedUnlocked(t, 3)
			runOnce(t, e, enqueuer.Result{Enqueued: 2, Failed: 1})
			if staged := b.stagedRows(t); len(staged) != 1 || staged[0].JobArgs != `{"n": 1}` || !staged[0].Failed {
				t.Fatalf("want only job 1 set aside, got %+v", staged)
			}
		})
	}
}

// decodeWithPriority9For decodes staged jobs as DecodeRaw does, but gives the job with args
// {"n": n} a priority River refuses.
func decodeWithPriority9For(n int) enqueuer.DecodeFunc {
	return func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
		var a struct{ N int }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, nil, err
		}
		if a.N == n {
			return enqueuer.RawJobArgs{JobKind: jobName, Args: args}, &river.InsertOpts{Priority: 9}, nil
		}
		return enqueuer.DecodeRaw(jobName, args)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, config := range map[string]enqueuer.Config{"NoJobNames": {}, "EmptyJobNames": {JobNames: []string{}}} {
		if e, err := enqueuer.New(b.pool, b.riverClient, enqueuer.DecodeRaw, b.logger, config); err == nil || e != nil {
			t.Errorf("%s: want an error and no enqueuer, got %v, %v", name, e, err)
		}
	}
}

func TestRunOnceConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const numJobs = 5000
	b.stageMany(t, numJobs)

	// Each enqueuer waits, in its first batch, until the other holds a batch too: run one after
	// the other, they would time out here. Both then hold 1000 locked rows at once, which
	// SKIP LOCKED must keep apart.
	var inFirstBatch atomic.Int32
	bothInFirstBatch := make(chan struct{})
	decode := func(i int) enqueuer.DecodeFunc {
		var once sync.Once
		return func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			once.Do(func() {
				if inFirstBatch.Add(1) == 2 {
					close(bothInFirstBatch)
				}
				select {
				case <-bothInFirstBatch:
				case <-time.After(30 * time.Second):
					t.Errorf("enqueuer %d: the other enqueuer held no batch while this one did", i)
				}
			})
			return enqueuer.DecodeRaw(jobName, args)
		}
	}
	enqueuers := []*enqueuer.Enqueuer{
		b.enqueuer(t, decode(0), enqueuer.Config{}),
		b.enqueuer(t, decode(1), enqueuer.Config{}),
	}

	// Each drains until it finds nothing it can take. The last batch to commit is followed by
	// another pass of the same enqueuer, so when both are done nothing is left.
	var wg sync.WaitGroup
	enqueued := make([]int, len(enqueuers))
	start := make(chan struct{})
	for i, e := range enqueuers {
		wg.Go(func() {
			<-start
			for {
				res, err := e.RunOnce(t.Context())
				if err != nil {
					t.Errorf("enqueuer %d: %s", i, err)
					return
				}
				if res.Enqueued == 0 {
					return
				}
				enqueued[i] += res.Enqueued
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("enqueued per enqueuer: %v", enqueued)

	if enqueued[0] < 1000 || enqueued[1] < 1000 {
		t.Errorf("want each enqueuer to have enqueued at least its first batch of 1000, got %v", enqueued)
	}
	if sum := enqueued[0] + enqueued[1]; sum != numJobs {
		t.Errorf("the enqueuers report %d jobs enqueued, want %d", sum, numJobs)
	}
	var total, distinct int
	err := b.pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT args) FROM river_job`).Scan(&total, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if total != numJobs || distinct != numJobs {
		t.Errorf("want %d River jobs, all different, got %d of which %d different", numJobs, total, distinct)
	}
	if n := b.count(t, "staged_jobs"); n != 0 {
		t.Errorf("want no staged jobs left, got %d", n)
	}
}
