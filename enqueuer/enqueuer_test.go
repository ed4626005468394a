package enqueuer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/phases"
)

func TestRunOnce(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesStagedReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{})
		want := phases.ReceiptJobArgs{RideID: 7, UserID: 3, Amount: 2000, Currency: "usd"}
		b.stage(t, phases.ReceiptJobName, want)

		runOnce(t, e, enqueuer.Result{Enqueued: 1})

		jobs := b.riverJobs(t)
		if len(jobs) != 1 {
			t.Fatalf("want 1 River job, got %d", len(jobs))
		}
		if jobs[0].Kind != phases.ReceiptJobName || jobs[0].State != "available" {
			t.Errorf("want an available %s job, got %s %s", phases.ReceiptJobName, jobs[0].State, jobs[0].Kind)
		}
		var got phases.ReceiptJobArgs
		if err := json.Unmarshal(jobs[0].Args, &got); err != nil || got != want {
			t.Errorf("want args %+v, got %s (%v)", want, jobs[0].Args, err)
		}
		if n := b.count(t, "staged_jobs"); n != 0 {
			t.Errorf("want no staged jobs left, got %d", n)
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
		if _, err := tx.Exec(t.Context(), `INSERT INTO staged_jobs (job_name, job_args) VALUES ($1, '{"n": 1}')`, testJobName); err != nil {
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
		e := b.enqueuer(t, decode, enqueuer.Config{BatchSize: 2})
		for i, name := range []string{"poison", "poison", testJobName, "poison"} {
			b.stage(t, name, map[string]int{"n": i + 1})
		}

		runOnce(t, e, enqueuer.Result{Failed: 2})
		runOnce(t, e, enqueuer.Result{Enqueued: 1, Failed: 1})
		runOnce(t, e, enqueuer.Result{})

		jobs := b.riverJobs(t)
		if len(jobs) != 4 {
			t.Fatalf("want 4 River jobs, got %+v", jobs)
		}
		for i, j := range jobs {
			if j.Kind == testJobName {
				if j.State != "available" || len(j.Tags) != 0 {
					t.Errorf("want the decodable job available and untagged, got %+v", j)
				}
				continue
			}
			// Set aside: never worked, but kept with its arguments and the reason.
			if j.Kind != "poison" || j.State != "cancelled" || len(j.Tags) != 1 || j.Tags[0] != enqueuer.FailedTag ||
				string(j.Args) != fmt.Sprintf(`{"n": %d}`, i+1) {
				t.Errorf("want poison job %d cancelled and tagged, got %+v", i+1, j)
			}
			if msg, _ := j.Metadata["enqueuer_error"].(string); !strings.Contains(msg, "no such job") {
				t.Errorf("want the decode error in the metadata, got %v", j.Metadata)
			}
		}
		if n := b.count(t, "staged_jobs"); n != 0 {
			t.Errorf("want no staged jobs left, got %d", n)
		}
	})

	t.Run("SetsAsideJobRiverRefuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode := func(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
			var a struct{ N int }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, nil, err
			}
			if a.N == 2 {
				return enqueuer.RawJobArgs{JobKind: jobName, Args: args}, &river.InsertOpts{Priority: 9}, nil
			}
			return enqueuer.DecodeRaw(jobName, args)
		}
		e := b.enqueuer(t, decode, enqueuer.Config{})
		b.stageMany(t, 3)

		runOnce(t, e, enqueuer.Result{Enqueued: 2, Failed: 1})

		states := map[string]string{}
		for _, j := range b.riverJobs(t) {
			states[string(j.Args)] = j.State
		}
		want := map[string]string{`{"n": 1}`: "available", `{"n": 2}`: "cancelled", `{"n": 3}`: "available"}
		if fmt.Sprint(states) != fmt.Sprint(want) {
			t.Errorf("want River jobs %v, got %v", want, states)
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
		_, err := b.pool.Exec(t.Context(), `
			CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'river_job refuses inserts'; END $$;
			CREATE TRIGGER refuse BEFORE INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION refuse()`)
		if err != nil {
			t.Fatal(err)
		}

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
}

func TestRunOnceConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const numJobs = 5000
	b.stageMany(t, numJobs)
	enqueuers := []*enqueuer.Enqueuer{
		b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{}),
		b.enqueuer(t, enqueuer.DecodeRaw, enqueuer.Config{}),
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
