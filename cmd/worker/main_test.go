package main

import (
	"context"
	"crypto/sha256"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/workers"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// world is a fresh database holding one charged ride whose receipt job waits in River.
type world struct {
	url   string
	pool  *pgxpool.Pool
	ride  *models.Ride
	rider *models.User
	jobID int64
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	w := &world{url: dbtest.NewDB(t)}
	var err error
	w.pool, err = pgxpool.New(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.Close)

	hash := sha256.Sum256([]byte(t.Name()))
	w.rider, err = models.UserInsert(ctx, w.pool, models.UserInsertParams{
		Email: "rider@example.com", StripeCustomerID: "cus_worker", APITokenHash: hash[:],
	})
	if err != nil {
		t.Fatal(err)
	}
	var rideID int64
	if err := w.pool.QueryRow(ctx, `
		INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
		VALUES (0, 0, 1, 1, 'ch_worker', $1) RETURNING id`, w.rider.ID).Scan(&rideID); err != nil {
		t.Fatal(err)
	}
	if w.ride, err = models.RideGetByIDForUser(ctx, w.pool, rideID, w.rider.ID); err != nil {
		t.Fatal(err)
	}

	// An insert-only client, as the enqueuer is.
	client, err := river.NewClient(riverpgxv5.New(w.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(ctx, workers.SendRideReceiptArgs{
		RideID: rideID, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.jobID = res.Job.ID
	return w
}

func (w *world) jobState(t *testing.T) string {
	t.Helper()
	var state string
	if err := w.pool.QueryRow(t.Context(), `SELECT state FROM river_job WHERE id = $1`, w.jobID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	return state
}

func TestOnce(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	t.Run("SendsTheReceiptAndPrintsCounts", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		server := smtptest.NewServer(t, smtptest.Options{})
		env := []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + server.URL()}

		stdout, stderr, code := proctest.Run(t, bin, env, "-once")
		if code != 0 || stdout != `{"completed":1,"failed":0,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want exit 0 and one line of counts, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		msgs := server.Messages()
		if len(msgs) != 1 || msgs[0].To[0] != "rider@example.com" {
			t.Fatalf("want one receipt mailed to the rider, got %+v", msgs)
		}
		if text, err := msgs[0].Text(); err != nil || !strings.Contains(text, "$20.00") {
			t.Fatalf("want the receipt to say $20.00, got %q (%v)", text, err)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err != nil {
			t.Fatalf("want the receipt recorded: %v", err)
		}
		if state := w.jobState(t); state != "completed" {
			t.Fatalf("want the job completed, got %s", state)
		}

		// Nothing left: a second pass does nothing and says so.
		stdout, stderr, code = proctest.Run(t, bin, env, "-once")
		if code != 0 || stdout != `{"completed":0,"failed":0,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want zero counts, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		if n := len(server.Messages()); n != 1 {
			t.Fatalf("want still 1 receipt, got %d", n)
		}
	})

	t.Run("CountsAFailedAttemptAndLeavesTheJobForLater", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		server := smtptest.NewServer(t, smtptest.Options{})
		server.FailNext(1, "451 4.3.0 Try again later")

		stdout, stderr, code := proctest.Run(t, bin, []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + server.URL()}, "-once")
		if code != 0 || stdout != `{"completed":0,"failed":1,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want exit 0 and one failure counted, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		if state := w.jobState(t); state != "available" && state != "retryable" {
			t.Fatalf("want the job waiting for its retry, got %s", state)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err == nil {
			t.Fatal("want no receipt recorded")
		}
	})
}

// TestRefusesToStartWithoutRiversSchema: a worker whose River does not find the schema it
// needs exits at once, before it works a job, and says what to run.
func TestRefusesToStartWithoutRiversSchema(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	// A newer River than the one that migrated the database: goose has nothing pending.
	t.Run("RiverBehind", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		dbtest.RiverBehind(t, w.url)
		_, stderr, code := proctest.Run(t, bin, []string{"DATABASE_URL=" + w.url}, "-once")
		if code == 0 || !strings.Contains(stderr, "River schema is behind") || !strings.Contains(stderr, "go run ./cmd/migrate up") {
			t.Fatalf("want a non-zero exit naming River's schema and the command to run, got %d:\n%s", code, stderr)
		}
		if state := w.jobState(t); state != "available" {
			t.Fatalf("want the job left alone, got %s", state)
		}
	})

	t.Run("NothingMigrated", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := proctest.Run(t, bin, []string{"DATABASE_URL=" + dbtest.NewEmptyDB(t)}, "-once")
		if code == 0 || !strings.Contains(stderr, "00002_river_schema.go") || !strings.Contains(stderr, "go run ./cmd/migrate up") {
			t.Fatalf("want a non-zero exit naming River's migration and the command to run, got %d:\n%s", code, stderr)
		}
	})
}

// A poll more frequent than the worker's fetches could be is a mistake, said before anything
// starts.
func TestRefusesAPollShorterThanItsFetchCooldown(t *testing.T) {
	t.Parallel()
	_, stderr, code := proctest.Run(t, proctest.Build(t, "worker"), []string{"DATABASE_URL=postgres://unused", "WORKER_POLL_INTERVAL=10ms"}, "-once")
	if code == 0 || !strings.Contains(stderr, "WORKER_POLL_INTERVAL must be at least 25ms") {
		t.Fatalf("want a non-zero exit naming WORKER_POLL_INTERVAL and its minimum, got %d:\n%s", code, stderr)
	}
}

// TestRunsUntilSIGTERM runs the worker the way the Procfile does, without SMTP_URL: the receipt
// appears in its log, and SIGTERM stops it with exit status 0 and nothing left running.
func TestRunsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	worker := proctest.Start(t, proctest.Build(t, "worker"), []string{"DATABASE_URL=" + w.url, "LOG_FORMAT=json"})

	line := proctest.WaitOutput(t, worker, "Worker: logged receipt", 15*time.Second)
	if !strings.Contains(line, `"ride_id":`) {
		t.Errorf("want the ride in the log line, got %s", line)
	}
	if strings.Contains(worker.Output(), "Worker: sent receipt") {
		t.Errorf("want a receipt that only went to the log not called sent:\n%s", worker.Output())
	}
	logged := proctest.WaitOutput(t, worker, "Mailer: logged message", time.Second)
	if !strings.Contains(logged, "$20.00") || !strings.Contains(logged, "rider@example.com") {
		t.Errorf("want the rendered receipt in the log, got %s", logged)
	}

	if err := worker.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := worker.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 after SIGTERM, got %d:\n%s", code, worker.Output())
	}
	if state := w.jobState(t); state != "completed" {
		t.Fatalf("want the job completed, got %s", state)
	}
	var running int
	if err := w.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Fatalf("want no job left running after a clean stop, got %d", running)
	}
}

// TestKeepsDiscardedJobs runs the worker over three receipt jobs that ended a month ago: one
// completed, one discarded and one cancelled. River's job cleaner deletes the completed one,
// which shows that it ran, and keeps the other two, receipts riders never got, for a person to
// act on.
func TestKeepsDiscardedJobs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	discardedID := w.jobID
	client, err := river.NewClient(riverpgxv5.New(w.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(t.Context(), workers.SendRideReceiptArgs{
		RideID: w.ride.ID + 1, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	completedID := res.Job.ID
	res, err = client.Insert(t.Context(), workers.SendRideReceiptArgs{
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
	if err := worker.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := worker.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 after SIGTERM, got %d:\n%s", code, worker.Output())
	}
}

// TestSIGTERMWhileSending stops the worker while a receipt is on its way to the mail server.
// The worker's hard stop comes 7 s after SIGTERM (the Runner's soft stop); the process manager's
// SIGKILL would come 10 s after. A job that ends within the grace period is finished. One stuck
// before its message is handed over is released for another worker. One whose message the server
// has must not be released: another worker would mail it again.
//
// The mail server holds the message until the test releases it (smtptest.HoldNext), so that each
// case orders its events (message at the server, SIGTERM, hard stop, the server's answer) by
// waiting for them rather than by a clock a loaded machine can outrun.
func TestSIGTERMWhileSending(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	// start starts a worker mailing through smtpURL, and returns once the job is running.
	start := func(t *testing.T, w *world, smtpURL string) *proctest.Process {
		worker := proctest.Start(t, bin, []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + smtpURL})
		deadline := time.Now().Add(10 * time.Second)
		for w.jobState(t) != "running" {
			if time.Now().After(deadline) {
				t.Fatalf("job not running after 10s:\n%s", worker.Output())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return worker
	}
	// holding starts a mail server that holds the receipt, and a worker mailing through it, and
	// sends the worker SIGTERM once the server has the whole message.
	holding := func(t *testing.T, w *world) (*smtptest.Server, *smtptest.Hold, *proctest.Process) {
		server := smtptest.NewServer(t, smtptest.Options{})
		hold := server.HoldNext()
		worker := start(t, w, server.URL())
		select {
		case <-hold.Arrived():
		case <-time.After(10 * time.Second):
			t.Fatalf("the receipt did not reach the mail server within 10s:\n%s", worker.Output())
		}
		sigterm(t, worker)
		return server, hold, worker
	}
	jobRow := func(t *testing.T, w *world) (state string, attempt, numErrors int) {
		t.Helper()
		if err := w.pool.QueryRow(t.Context(), `SELECT state, attempt, coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, w.jobID).
			Scan(&state, &attempt, &numErrors); err != nil {
			t.Fatal(err)
		}
		return state, attempt, numErrors
	}
	const cancelling = "Worker: jobs still running, cancelling them"

	// The server answers as soon as the worker has begun to stop: 7 s before the hard stop.
	t.Run("FinishesAJobThatEndsInTime", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		server, hold, worker := holding(t, w)
		proctest.WaitOutput(t, worker, "Worker: stopping", 10*time.Second)
		hold.Release()
		if code := worker.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("want exit 0, got %d:\n%s", code, worker.Output())
		}
		if strings.Contains(worker.Output(), cancelling) {
			t.Fatalf("want the job finished within the soft stop, not cancelled:\n%s", worker.Output())
		}
		if state := w.jobState(t); state != "completed" || len(server.Messages()) != 1 {
			t.Fatalf("want the job completed and the receipt mailed, got %s and %d messages", state, len(server.Messages()))
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err != nil {
			t.Fatalf("want the receipt recorded: %v", err)
		}
	})

	t.Run("ReleasesAJobStuckBeforeItsMessageIsHandedOver", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		worker := start(t, w, "smtp://"+silentServer(t))
		sigterm(t, worker)
		if code := worker.Wait(t, 11*time.Second); code != 0 {
			t.Fatalf("want exit 0 within the grace period, got %d:\n%s", code, worker.Output())
		}
		if state, attempt, numErrors := jobRow(t, w); state != "available" || attempt != 0 || numErrors != 0 {
			t.Fatalf("want the job released as available with no attempt used up, got %s, attempt %d, %d errors", state, attempt, numErrors)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err == nil {
			t.Fatal("want no receipt recorded for a send that was cut short")
		}
		if !strings.Contains(worker.Output(), cancelling) {
			t.Errorf("want the cancellation logged:\n%s", worker.Output())
		}
	})

	// The server answers once the hard stop has cancelled the job, within the grace period.
	t.Run("FinishesAJobWhoseMessageIsAtTheServer", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		server, hold, worker := holding(t, w)
		proctest.WaitOutput(t, worker, cancelling, 15*time.Second)
		hold.Release()
		if code := worker.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("want exit 0 within the grace period, got %d:\n%s", code, worker.Output())
		}
		if state, attempt, _ := jobRow(t, w); state != "completed" || attempt != 1 {
			t.Fatalf("want the job completed, not released to mail the receipt again; got %s at attempt %d", state, attempt)
		}
		if n := len(server.Messages()); n != 1 {
			t.Fatalf("want 1 receipt mailed, got %d", n)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err != nil {
			t.Fatalf("want the receipt recorded: %v", err)
		}
	})

	// The server has not answered when the grace period ends. Whether it will deliver is not
	// known; releasing the job would mail the receipt again at once, so it is left running for
	// River to rescue, an hour later.
	t.Run("LeavesAJobWhoseMessageIsAtTheServerRunning", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		_, _, worker := holding(t, w) // never released
		if code := worker.Wait(t, 15*time.Second); code == 0 {
			t.Fatalf("want a non-zero exit for a stop that left a job running:\n%s", worker.Output())
		}
		if state, attempt, _ := jobRow(t, w); state != "running" || attempt != 1 {
			t.Fatalf("want the job left running, not released to mail the receipt again; got %s at attempt %d", state, attempt)
		}
		if !strings.Contains(worker.Output(), "did not return after being cancelled") {
			t.Errorf("want the job left running reported:\n%s", worker.Output())
		}
	})
}

func sigterm(t *testing.T, p *proctest.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// silentServer listens on a free port of loopback, accepts connections and never says a word,
// as a mail server that hangs before its greeting does, and returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	t.Cleanup(func() {
		_ = listener.Close()
		<-done
		for _, conn := range conns {
			_ = conn.Close()
		}
	})
	return listener.Addr().String()
}
