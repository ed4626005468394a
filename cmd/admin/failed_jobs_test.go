package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// testBundle is a database with a rider and two charged rides, and the binaries that
// fail and retry their receipt jobs for real.
type testBundle struct {
	admin, worker, enqueuer string
	url                     string
	env                     []string
	pool                    *pgxpool.Pool
	userID                  int64
	rideA, rideB            int64
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{
		admin:    proctest.Build(t, "admin"),
		worker:   proctest.Build(t, "worker"),
		enqueuer: proctest.Build(t, "enqueuer"),
		url:      dbtest.NewDB(t),
	}
	b.env = []string{"DATABASE_URL=" + b.url}
	var err error
	b.pool, err = pgxpool.New(t.Context(), b.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.pool.Close)

	hash := sha256.Sum256([]byte(t.Name()))
	user, err := models.UserInsert(t.Context(), b.pool, models.UserInsertParams{
		Email: "rider@example.com", StripeCustomerID: "cus_failed", APITokenHash: hash[:],
	})
	if err != nil {
		t.Fatal(err)
	}
	b.userID = user.ID
	for i, ride := range []*int64{&b.rideA, &b.rideB} {
		if err := b.pool.QueryRow(t.Context(), `
			INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
			VALUES (0, 0, 1, 1, $1, $2) RETURNING id`, fmt.Sprintf("ch_failed_%d", i), user.ID).Scan(ride); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// run runs a binary to completion and fails the test unless it exits 0; it returns stdout.
func (b *testBundle) run(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	stdout, stderr, code := proctest.Run(t, bin, env, args...)
	if code != 0 {
		t.Fatalf("%s %v exited %d: %s%s", bin, args, code, stdout, stderr)
	}
	return stdout
}

// failedJobJSON is a line of list-failed-jobs -json, as a script reads it.
type failedJobJSON struct {
	ID          string          `json:"id"`
	Source      string          `json:"source"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	CreatedAt   time.Time       `json:"created_at"`
	FailedAt    time.Time       `json:"failed_at"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Errors      []struct {
		At      time.Time `json:"at"`
		Attempt int       `json:"attempt"`
		Error   string    `json:"error"`
	} `json:"errors"`
	LastError string `json:"last_error"`
}

func (b *testBundle) listJSON(t *testing.T) []failedJobJSON {
	t.Helper()
	var jobs []failedJobJSON
	for line := range strings.Lines(b.run(t, b.admin, b.env, "list-failed-jobs", "-json")) {
		var j failedJobJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("want one JSON object per line, got %q: %v", line, err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// rideID is the ride_id of a receipt job's args.
func rideID(t *testing.T, args json.RawMessage) string {
	t.Helper()
	var receipt struct {
		RideID string `json:"ride_id"`
	}
	if err := json.Unmarshal(args, &receipt); err != nil {
		t.Fatalf("want a receipt's args, got %s: %v", args, err)
	}
	return receipt.RideID
}

// TestFailedJobs fails a receipt in each of the two places work can fail for good, for real:
// River discards a job whose last attempt the mail server refused, and the enqueuer sets aside a
// staged job whose arguments River could never take. list-failed-jobs shows both with their
// errors; once the causes are fixed, retry-job puts each back to work, and the receipts go out.
func TestFailedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("EmptyShowsOnlyTheHeader", func(t *testing.T) {
		out := b.run(t, b.admin, b.env, "list-failed-jobs")
		if !strings.HasPrefix(out, "ID") || strings.Count(out, "\n") != 1 {
			t.Fatalf("want the header alone, got %q", out)
		}
		if out := b.run(t, b.admin, b.env, "list-failed-jobs", "-json"); out != "" {
			t.Fatalf("want no JSON lines, got %q", out)
		}
	})

	// Ride A's receipt job has a single attempt, which the mail server refuses: River discards it.
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	inserted, err := client.Insert(t.Context(), jobargs.SendRideReceipt{
		RideID: b.rideA, UserID: b.userID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, &river.InsertOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	riverID := fmt.Sprintf("river:%d", inserted.Job.ID)
	smtp := smtptest.NewServer(t, smtptest.Options{})
	smtp.FailNext(1, "554 5.7.1 Relay access denied")
	workerEnv := append([]string{"SMTP_URL=" + smtp.URL()}, b.env...)
	if out := b.run(t, b.worker, workerEnv, "-once"); out != `{"completed":0,"failed":0,"discarded":1,"cancelled":0}`+"\n" {
		t.Fatalf("want the receipt job discarded, got %s", out)
	}

	// Ride B's receipt is staged without its currency: the enqueuer sets it aside.
	var stagedNum int64
	if err := b.pool.QueryRow(t.Context(), `
		INSERT INTO staged_jobs (job_name, job_args, user_id)
		VALUES ($1, jsonb_build_object('ride_id', $2::bigint::text, 'user_id', $3::bigint, 'amount', 2000, 'currency', ''), $3)
		RETURNING id`, jobargs.SendRideReceiptKind, b.rideB, b.userID).Scan(&stagedNum); err != nil {
		t.Fatal(err)
	}
	stagedID := fmt.Sprintf("staged:%d", stagedNum)
	if out := b.run(t, b.enqueuer, b.env, "-once"); out != `{"enqueued":0,"failed":1}`+"\n" {
		t.Fatalf("want the staged job set aside, got %s", out)
	}

	t.Run("JSONWithTheirErrorsNewestFirst", func(t *testing.T) {
		jobs := b.listJSON(t)
		if len(jobs) != 2 {
			t.Fatalf("want the discarded job and the failed staged job, got %+v", jobs)
		}
		staged, discarded := jobs[0], jobs[1]
		if staged.ID != stagedID || staged.Source != "staged" || staged.Kind != jobargs.SendRideReceiptKind ||
			!strings.Contains(staged.LastError, "currency must be a three-letter ISO 4217 code") ||
			len(staged.Errors) != 1 || staged.Errors[0].Error != staged.LastError || !staged.Errors[0].At.Equal(staged.FailedAt) ||
			rideID(t, staged.Args) != fmt.Sprint(b.rideB) || staged.Attempt != 0 {
			t.Errorf("want the failed staged job first, with the enqueuer's error; got %+v", staged)
		}
		if discarded.ID != riverID || discarded.Source != "river" || discarded.Kind != jobargs.SendRideReceiptKind ||
			discarded.Attempt != 1 || discarded.MaxAttempts != 1 || len(discarded.Errors) != 1 ||
			discarded.Errors[0].Attempt != 1 || !strings.HasSuffix(discarded.Errors[0].Error, `554 "5.7.1 Relay access denied"`) ||
			discarded.LastError != discarded.Errors[0].Error || discarded.Errors[0].At.IsZero() ||
			rideID(t, discarded.Args) != fmt.Sprint(b.rideA) {
			t.Errorf("want the discarded River job second, with River's errors; got %+v", discarded)
		}
		if !discarded.FailedAt.Before(staged.FailedAt) || discarded.CreatedAt.IsZero() {
			t.Errorf("want the jobs newest failure first, got %s then %s", staged.FailedAt, discarded.FailedAt)
		}
	})

	t.Run("TableForReading", func(t *testing.T) {
		lines := strings.Split(strings.TrimSpace(b.run(t, b.admin, b.env, "list-failed-jobs")), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") ||
			!strings.HasPrefix(lines[1], stagedID+" ") || !strings.HasSuffix(lines[1], "currency must be a three-letter ISO 4217 code") ||
			!strings.HasPrefix(lines[2], riverID+" ") || !strings.Contains(lines[2], " 1/1 ") || !strings.HasSuffix(lines[2], `554 "5.7.1 Relay access denied"`) {
			t.Fatalf("want a header and a line per job, with its id as retry-job takes it; got\n%s", strings.Join(lines, "\n"))
		}
	})

	t.Run("Limit", func(t *testing.T) {
		jobs := strings.Split(strings.TrimSpace(b.run(t, b.admin, b.env, "list-failed-jobs", "-json", "-limit", "1")), "\n")
		if len(jobs) != 1 || !strings.Contains(jobs[0], stagedID) {
			t.Fatalf("want the newest failure alone, got %q", jobs)
		}
		if _, errOut, code := proctest.Run(t, b.admin, b.env, "list-failed-jobs", "-limit", "0"); code == 0 || !strings.Contains(errOut, "-limit") {
			t.Fatalf("want -limit 0 refused, got %d %s", code, errOut)
		}
	})

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"NoID", []string{"retry-job"}, "give one job id"},
		{"BareNumber", []string{"retry-job", strings.TrimPrefix(riverID, "river:")}, "give river:ID or staged:ID"},
		{"UnknownSource", []string{"retry-job", "sidekiq:1"}, "give river:ID or staged:ID"},
	} {
		t.Run("RetryRefuses"+tt.name, func(t *testing.T) {
			if _, errOut, code := proctest.Run(t, b.admin, b.env, tt.args...); code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("want exit 2 saying %q, got %d: %s", tt.want, code, errOut)
			}
		})
	}

	// The mail server takes mail again; the discarded job runs once more and sends the receipt.
	t.Run("RetryRiverJob", func(t *testing.T) {
		out := b.run(t, b.admin, b.env, "retry-job", riverID)
		if !strings.Contains(out, riverID+" (send_ride_receipt) is available again") {
			t.Fatalf("want the job said to be available again, got %q", out)
		}
		var state string
		var attempt, maxAttempts int
		if err := b.pool.QueryRow(t.Context(), `SELECT state, attempt, max_attempts FROM river_job WHERE id = $1`, inserted.Job.ID).
			Scan(&state, &attempt, &maxAttempts); err != nil {
			t.Fatal(err)
		}
		if state != "available" || attempt != 1 || maxAttempts != 2 {
			t.Fatalf("want the job available with one more attempt, got %s at %d of %d", state, attempt, maxAttempts)
		}
		if out := b.run(t, b.worker, workerEnv, "-once"); out != `{"completed":1,"failed":0,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want the retried job completed, got %s", out)
		}
		if _, err := models.RideReceiptGet(t.Context(), b.pool, b.rideA); err != nil || len(smtp.Messages()) != 1 {
			t.Fatalf("want ride A's receipt mailed once and recorded, got %d messages (%v)", len(smtp.Messages()), err)
		}

		if _, errOut, code := proctest.Run(t, b.admin, b.env, "retry-job", riverID); code != 1 || !strings.Contains(errOut, "is completed, not discarded or cancelled") {
			t.Fatalf("want a completed job refused, got %d: %s", code, errOut)
		}
	})

	// Its arguments corrected, the staged job goes back to the enqueuer, which runs with an hour
	// between polls: only retry-job's notification can wake it in time.
	t.Run("RetryStagedJob", func(t *testing.T) {
		if _, err := b.pool.Exec(t.Context(), `UPDATE staged_jobs SET job_args = job_args || '{"currency": "usd"}' WHERE id = $1`, stagedNum); err != nil {
			t.Fatal(err)
		}
		enq := proctest.Start(t, b.enqueuer, append([]string{"ENQUEUER_POLL_INTERVAL=1h"}, b.env...))
		proctest.WaitOutput(t, enq, "Enqueuer: started", 10*time.Second)

		out := b.run(t, b.admin, b.env, "retry-job", stagedID)
		if !strings.Contains(out, stagedID+" is staged again") {
			t.Fatalf("want the job said to be staged again, got %q", out)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			var n int
			if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'ride_id' = $2`,
				jobargs.SendRideReceiptKind, fmt.Sprint(b.rideB)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("want the enqueuer to move the retried job into River at once:\n%s", enq.Output())
			}
			time.Sleep(20 * time.Millisecond)
		}
		enq.Terminate(t, 10*time.Second)
		if out := b.run(t, b.worker, workerEnv, "-once"); out != `{"completed":1,"failed":0,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want the job worked, got %s", out)
		}
		if _, err := models.RideReceiptGet(t.Context(), b.pool, b.rideB); err != nil {
			t.Fatalf("want ride B's receipt recorded: %v", err)
		}

		if _, errOut, code := proctest.Run(t, b.admin, b.env, "retry-job", stagedID); code != 1 || !strings.Contains(errOut, "is no failed staged job") {
			t.Fatalf("want a job no longer staged refused, got %d: %s", code, errOut)
		}
		if out := b.run(t, b.admin, b.env, "list-failed-jobs", "-json"); out != "" {
			t.Fatalf("want nothing failed left, got %q", out)
		}
	})
}

// TestFailedJobsNeedRiversSchema: the commands on failed jobs read River's tables, and refuse to
// on a schema that this build's River does not know.
func TestFailedJobsNeedRiversSchema(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")
	url := dbtest.NewDB(t)
	dbtest.RiverBehind(t, url)
	for _, args := range [][]string{{"list-failed-jobs"}, {"retry-job", "river:1"}} {
		_, errOut, code := proctest.Run(t, admin, []string{"DATABASE_URL=" + url}, args...)
		if code != 1 || !strings.Contains(errOut, "River schema is behind") || !strings.Contains(errOut, "go run ./cmd/migrate up") {
			t.Fatalf("admin %v: want exit 1 naming River's schema and the command to run, got %d: %s", args, code, errOut)
		}
	}
}

// TestRetryJobCancelled: a River job its worker cancelled as pointless (the rider's address was
// one no mail server takes, say) can be put back once that is no longer true; a job waiting for
// its turn is left alone.
func TestRetryJobCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	inserted, err := client.Insert(t.Context(), jobargs.SendRideReceipt{
		RideID: b.rideA, UserID: b.userID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("river:%d", inserted.Job.ID)

	if _, errOut, code := proctest.Run(t, b.admin, b.env, "retry-job", id); code != 1 || !strings.Contains(errOut, "is available, not discarded or cancelled") {
		t.Fatalf("want a waiting job refused, got %d: %s", code, errOut)
	}
	if _, err := client.JobCancel(t.Context(), inserted.Job.ID); err != nil {
		t.Fatal(err)
	}
	// Listed as failed work, with its state.
	if out := b.run(t, b.admin, b.env, "list-failed-jobs", "-json"); !strings.Contains(out, `"id":"`+id+`","source":"river","state":"cancelled"`) {
		t.Fatalf("want the cancelled job listed, got %s", out)
	}
	if out := b.run(t, b.admin, b.env, "retry-job", id); !strings.Contains(out, id+" (send_ride_receipt) is available again") {
		t.Fatalf("want the cancelled job available again, got %q", out)
	}
	job, err := client.JobGet(t.Context(), inserted.Job.ID)
	if err != nil || job.State != "available" || job.FinalizedAt != nil {
		t.Fatalf("want the job available, got %+v (%v)", job, err)
	}
}
