package enqueuer_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/models"
)

// testJobName is the kind of the jobs the tests stage, unless they stage receipts.
const testJobName = "test_job"

// testUserID is the rider of every test job: staged_jobs has no foreign key to users.
const testUserID int64 = 7

type testBundle struct {
	pool        *pgxpool.Pool
	riverClient *river.Client[pgx.Tx]
	logger      *slog.Logger
	logs        *logBuffer // what logger wrote, for the tests that check a log line
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), nil))
	riverClient, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		t.Fatalf("error creating River client: %s", err)
	}
	return &testBundle{pool: pool, riverClient: riverClient, logger: logger, logs: logs}
}

// testJobNames are the job names an enqueuer of the tests knows unless the test says otherwise.
var testJobNames = []string{testJobName, jobargs.SendRideReceiptKind}

// enqueuer returns an enqueuer on the bundle's database, stopped when the test ends. It knows
// testJobNames unless config names others.
func (b *testBundle) enqueuer(t *testing.T, decode enqueuer.DecodeFunc, config enqueuer.Config) *enqueuer.Enqueuer {
	t.Helper()
	if config.JobNames == nil {
		config.JobNames = testJobNames
	}
	e, err := enqueuer.New(b.pool, b.riverClient, decode, b.logger, config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// logBuffer collects log output written from several goroutines.
type logBuffer struct{ proctest.SyncBuffer }

// lines returns the lines logged so far that contain substr.
func (l *logBuffer) lines(substr string) []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// runOnce runs one pass and checks what it reports.
func runOnce(t *testing.T, e *enqueuer.Enqueuer, want enqueuer.Result) {
	t.Helper()
	res, err := e.RunOnce(t.Context())
	if err != nil {
		t.Fatalf("error running enqueuer: %s", err)
	}
	if *res != want {
		t.Fatalf("want %+v, got %+v", want, *res)
	}
}

// stage stages a job as the API does, outside any other transaction.
func (b *testBundle) stage(t *testing.T, name string, args any) *models.StagedJob {
	t.Helper()
	encoded, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var j models.StagedJob
	batch := &pgx.Batch{}
	models.StagedJobInsert(batch, testUserID, name, encoded, nil)
	batch.Queue(`SELECT id, created_at, job_name, job_args FROM staged_jobs WHERE id = lastval()`).
		QueryRow(func(row pgx.Row) error { return row.Scan(&j.ID, &j.CreatedAt, &j.JobName, &j.JobArgs) })
	if err := b.pool.SendBatch(t.Context(), batch).Close(); err != nil {
		t.Fatalf("error staging job: %s", err)
	}
	// As the API does once its transaction committed.
	if err := models.StagedJobsNotify(t.Context(), b.pool); err != nil {
		t.Fatal(err)
	}
	return &j
}

// stageQuietly stages a job as stage does, without waking the enqueuer: as a process that died
// between its commit and its notification leaves it.
func (b *testBundle) stageQuietly(t *testing.T, name string, args any) {
	t.Helper()
	encoded, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	batch := &pgx.Batch{}
	models.StagedJobInsert(batch, testUserID, name, encoded, nil)
	if err := b.pool.SendBatch(t.Context(), batch).Close(); err != nil {
		t.Fatalf("error staging job: %s", err)
	}
}

// stageMany stages n test jobs with arguments {"n": 1} to {"n": n}, in one statement.
func (b *testBundle) stageMany(t *testing.T, n int) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), `
		INSERT INTO staged_jobs (job_name, job_args, user_id)
		SELECT $1, jsonb_build_object('n', i), $3 FROM generate_series(1, $2) AS i`, testJobName, n, testUserID)
	if err != nil {
		t.Fatalf("error staging jobs: %s", err)
	}
}

func (b *testBundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("error counting %s: %s", table, err)
	}
	return n
}

// stagedRow is a row of staged_jobs, as far as the tests look at it.
type stagedRow struct {
	JobName   string
	JobArgs   string
	Failed    bool
	LastError *string
}

// stagedRows lists the staged jobs, failed or not, in staged order.
func (b *testBundle) stagedRows(t *testing.T) []stagedRow {
	t.Helper()
	rows, _ := b.pool.Query(t.Context(), `
		SELECT job_name, job_args::text, failed_at IS NOT NULL, last_error FROM staged_jobs ORDER BY id`)
	staged, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stagedRow])
	if err != nil {
		t.Fatalf("error listing staged jobs: %s", err)
	}
	return staged
}

// riverJob is a row of River's job table, as far as the tests look at it.
type riverJob struct {
	Kind     string
	Args     json.RawMessage
	State    string
	Tags     []string
	Metadata map[string]any
}

// riverJobs lists River's jobs in insertion order.
func (b *testBundle) riverJobs(t *testing.T) []riverJob {
	t.Helper()
	rows, _ := b.pool.Query(t.Context(), `SELECT kind, args, state, tags, metadata FROM river_job ORDER BY id`)
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[riverJob])
	if err != nil {
		t.Fatalf("error listing River jobs: %s", err)
	}
	return jobs
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitStagedUnlocked waits until n staged jobs can be locked, that is until no other session
// holds any of them, for up to 10 s.
func (b *testBundle) waitStagedUnlocked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var free int
		err := pgx.BeginFunc(t.Context(), b.pool, func(tx pgx.Tx) error {
			return tx.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT 1 FROM staged_jobs FOR UPDATE SKIP LOCKED) s`).Scan(&free)
		})
		if err != nil {
			t.Fatal(err)
		}
		if free == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d staged jobs free of locks, %d are after 10 s", n, free)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refuse makes table fail every statement of kind (INSERT, DELETE) with message, through a
// trigger named refuse.
func (b *testBundle) refuse(t *testing.T, kind, table, message string) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), fmt.Sprintf(`
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION '%s'; END $$;
		CREATE TRIGGER refuse BEFORE %s ON %s FOR EACH ROW EXECUTE FUNCTION refuse()`, message, kind, table))
	if err != nil {
		t.Fatal(err)
	}
}
