package enqueuer_test

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/dbtest"
	"github.com/rocketrides/rocketrides/models"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testJobName is the kind of the jobs the tests stage, unless they stage receipts.
const testJobName = "test_job"

type testBundle struct {
	pool        *pgxpool.Pool
	riverClient *river.Client[pgx.Tx]
	logger      *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	riverClient, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		t.Fatalf("error creating River client: %s", err)
	}
	return &testBundle{pool: pool, riverClient: riverClient, logger: logger}
}

// enqueuer returns an enqueuer on the bundle's database, stopped when the test ends.
func (b *testBundle) enqueuer(t *testing.T, decode enqueuer.DecodeFunc, config enqueuer.Config) *enqueuer.Enqueuer {
	t.Helper()
	e := enqueuer.New(b.pool, b.riverClient, decode, b.logger, config)
	t.Cleanup(e.Stop)
	return e
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
	j, err := models.StagedJobInsert(t.Context(), b.pool, name, encoded)
	if err != nil {
		t.Fatalf("error staging job: %s", err)
	}
	return j
}

// stageMany stages n test jobs with arguments {"n": 1} to {"n": n}, in one statement.
func (b *testBundle) stageMany(t *testing.T, n int) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), `
		INSERT INTO staged_jobs (job_name, job_args)
		SELECT $1, jsonb_build_object('n', i) FROM generate_series(1, $2) AS i`, testJobName, n)
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
