package workers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestSendRideReceiptWorker(t *testing.T) {
	t.Parallel()

	t.Run("MailsReceiptOnceAndRecordsItWithTheCompletion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRide(t, b.rider, "ch_receipt1")
		job := b.insertJob(t, receiptArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}

		msgs := b.smtp.Messages()
		if len(msgs) != 1 {
			t.Fatalf("want 1 receipt mailed, got %d", len(msgs))
		}
		got := msgs[0]
		if len(got.To) != 1 || got.To[0] != b.rider.Email || got.From != "receipts@rocketrides.example" || !got.TLS {
			t.Errorf("unexpected envelope %q -> %q (TLS %t)", got.From, got.To, got.TLS)
		}
		parsed, err := got.Parse()
		if err != nil {
			t.Fatal(err)
		}
		wantID := ReceiptMessageID(ride, "rocketrides.example")
		if id := parsed.Header.Get("Message-Id"); id != wantID {
			t.Errorf("want Message-ID %s, got %s", wantID, id)
		}
		if subject := parsed.Header.Get("Subject"); !strings.Contains(subject, "$20.00") {
			t.Errorf("want the amount in the subject, got %q", subject)
		}
		text, err := got.Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Charged    $20.00", "ch_receipt1", fmt.Sprintf("#%d", ride.ID), "37.77490, -122.41940"} {
			if !strings.Contains(text, want) {
				t.Errorf("want the receipt to say %q, got:\n%s", want, text)
			}
		}

		receipt := b.receipt(t, ride)
		if receipt == nil || receipt.MessageID != wantID {
			t.Fatalf("want the receipt recorded with its Message-ID, got %+v", receipt)
		}
		if row := b.jobRow(t, job.ID); row.State != rivertype.JobStateCompleted || row.Attempt != 1 {
			t.Errorf("want the job completed at the first attempt, got %s at attempt %d", row.State, row.Attempt)
		}
		// Rows written by one transaction carry its id in xmin: the receipt and the job's
		// completion were committed together, not one after the other.
		var sameTx bool
		err = b.pool.QueryRow(t.Context(), `
			SELECT (SELECT xmin FROM rides WHERE id = $1)::text = (SELECT xmin FROM river_job WHERE id = $2)::text`,
			ride.ID, job.ID).Scan(&sameTx)
		if err != nil {
			t.Fatal(err)
		}
		if !sameTx {
			t.Error("want the receipt recorded in the transaction that completed the job")
		}
	})

	// A busy worker: once the receipt is at the mail server, the process's other jobs hold every
	// connection of the pool. Recording must not wait for one of them, or it times out, the job
	// is retried, and the rider gets a second receipt.
	t.Run("RecordsOnTheConnectionItHeldWhileSending", func(t *testing.T) {
		t.Parallel()
		const maxConns = 2
		var hog *poolHog
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			// A pool of the workers' own, so that River keeps working on the bundle's.
			config, err := pgxpool.ParseConfig(b.pool.Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			config.MaxConns = maxConns
			workersPool, err := pgxpool.NewWithConfig(t.Context(), config)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(workersPool.Close)
			hog = &poolHog{pool: workersPool}
			t.Cleanup(hog.releaseAll) // before River stops, which waits for the job
			deps.Pool = workersPool
			deps.Mailer = afterSend{Mailer: deps.Mailer, hook: hog.takeAll}
		})
		ride := b.newRide(t, b.rider, "ch_busy")
		job := b.insertJob(t, receiptArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		if n := hog.numTaken(); n != maxConns-1 {
			t.Fatalf("want the other jobs to have held %d connections, all but the job's, got %d", maxConns-1, n)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 receipt mailed, got %d", n)
		}
		if row := b.jobRow(t, job.ID); row.State != rivertype.JobStateCompleted || row.Attempt != 1 {
			t.Errorf("want the job completed at the first attempt, got %s at attempt %d", row.State, row.Attempt)
		}
		if b.receipt(t, ride) == nil {
			t.Fatal("want the receipt recorded")
		}
	})

	t.Run("RecordsOnANewConnectionWhenTheDatabaseDroppedItsOwn", func(t *testing.T) {
		t.Parallel()
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			// A pool of the workers' own, named, so that its connections alone can be cut.
			config, err := pgxpool.ParseConfig(b.pool.Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			config.ConnConfig.RuntimeParams["application_name"] = "receipt_workers_under_test"
			workersPool, err := pgxpool.NewWithConfig(t.Context(), config)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(workersPool.Close)
			deps.Pool = workersPool
			// A database restart, as the server accepts the message: every connection dies.
			deps.Mailer = afterSend{Mailer: deps.Mailer, hook: func() {
				if _, err := b.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE application_name = 'receipt_workers_under_test'`); err != nil {
					t.Error(err)
				}
			}}
		})
		ride := b.newRide(t, b.rider, "ch_restart")
		job := b.insertJob(t, receiptArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 receipt mailed, not a second on a retry, got %d", n)
		}
		if row := b.jobRow(t, job.ID); row.State != rivertype.JobStateCompleted || row.Attempt != 1 {
			t.Errorf("want the job completed at the first attempt, got %s at attempt %d", row.State, row.Attempt)
		}
		if b.receipt(t, ride) == nil {
			t.Fatal("want the receipt recorded")
		}
	})

	// A primary that froze as the server accepted the message: the worker's connections to it
	// answer nothing. The try on the job's own connection gives up after recordAttemptTimeout,
	// and the next, on a connection dialled for it, records the receipt: mailed once.
	t.Run("RecordsOnANewConnectionWhenItsOwnHangs", func(t *testing.T) {
		t.Parallel()
		primary := &freezer{}
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			deps.Pool = primary.pool(t, b.pool.Config())
			deps.Mailer = afterSend{Mailer: deps.Mailer, hook: primary.freeze}
		})
		ride := b.newRide(t, b.rider, "ch_frozen")
		job := b.insertJob(t, receiptArgs(ride), nil)

		// River's own connections are frozen too, so the job's end is read from the table.
		deadline := time.Now().Add(RecordTimeout + 30*time.Second)
		for b.receipt(t, ride) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no receipt recorded within %s of the freeze", RecordTimeout+30*time.Second)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if primary.numFrozen() == 0 {
			t.Fatal("want the workers' connections frozen, found none")
		}
		var state string
		var attempt int
		if err := b.pool.QueryRow(t.Context(), `SELECT state, attempt FROM river_job WHERE id = $1`, job.ID).Scan(&state, &attempt); err != nil {
			t.Fatal(err)
		}
		if state != string(rivertype.JobStateCompleted) || attempt != 1 {
			t.Errorf("want the job completed at its first attempt, got %s at attempt %d", state, attempt)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 receipt mailed, got %d", n)
		}
	})

	// The commit that records the receipt goes through, and its answer is lost (the primary
	// froze right after): the retry finds the job completed by that commit, says so, and
	// neither records it again nor mails it again.
	t.Run("RecordsOnceWhenTheCommitsAnswerIsLost", func(t *testing.T) {
		t.Parallel()
		primary := &freezer{}
		var logs proctest.SyncBuffer
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			deps.Pool = primary.pool(t, b.pool.Config())
			deps.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			deps.Mailer = afterSend{Mailer: deps.Mailer, hook: primary.freezeAfterCommit}
		})
		ride := b.newRide(t, b.rider, "ch_answer_lost")
		job := b.insertJob(t, receiptArgs(ride), nil)

		deadline := time.Now().Add(RecordTimeout + 30*time.Second)
		for !strings.Contains(logs.String(), `msg="Worker: sent receipt"`) {
			if time.Now().After(deadline) {
				t.Fatalf("the worker did not finish the receipt within %s:\n%s", RecordTimeout+30*time.Second, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(logs.String(), "receipt was recorded by an earlier try") || strings.Contains(logs.String(), "recorded by another job") {
			t.Fatalf("want the earlier try's commit found as this job's, got:\n%s", logs.String())
		}
		var state string
		var attempt int
		if err := b.pool.QueryRow(t.Context(), `SELECT state, attempt FROM river_job WHERE id = $1`, job.ID).Scan(&state, &attempt); err != nil {
			t.Fatal(err)
		}
		if state != string(rivertype.JobStateCompleted) || attempt != 1 || b.receipt(t, ride) == nil {
			t.Errorf("want the job completed at its first attempt and the receipt recorded, got %s at attempt %d", state, attempt)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 receipt mailed, got %d", n)
		}
	})

	// The worker's log says what became of the receipt: sent through SMTP, or only logged by
	// the mailer of a machine without SMTP_URL, which no rider receives.
	t.Run("LogSaysSentOrLogged", func(t *testing.T) {
		t.Parallel()
		for _, smtp := range []bool{true, false} {
			var logs, mailLog proctest.SyncBuffer
			b := setupWith(t, func(b *testBundle, deps *Deps) {
				deps.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				if !smtp {
					deps.Mailer = mailer.NewLog(slog.New(slog.NewTextHandler(&mailLog, nil)))
				}
			})
			ride := b.newRide(t, b.rider, "ch_receipt_log")
			job := b.insertJob(t, receiptArgs(ride), nil)
			if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
				t.Fatalf("want the job completed, got %s", ev.Kind)
			}

			sent := strings.Contains(logs.String(), `msg="Worker: sent receipt"`)
			logged := strings.Contains(logs.String(), `msg="Worker: logged receipt`)
			mailed := len(b.smtp.Messages()) == 1
			inMailLog := strings.Contains(mailLog.String(), "Mailer: logged message")
			if sent != smtp || logged == smtp || mailed != smtp || inMailLog == smtp {
				t.Fatalf("smtp=%t: want sent=%t, got sent=%t logged=%t mailed=%t in the mail log=%t; worker log:\n%s",
					smtp, smtp, sent, logged, mailed, inMailLog, logs.String())
			}
		}
	})

	t.Run("RideAlreadyReceiptedSendsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRide(t, b.rider, "ch_receipt2")
		if _, err := b.pool.Exec(t.Context(), `
			UPDATE rides SET receipt_sent_at = now() - interval '2 days', receipt_message_id = '<earlier@rocketrides.example>'
			WHERE id = $1`, ride.ID); err != nil {
			t.Fatal(err)
		}
		job := b.insertJob(t, receiptArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 0 {
			t.Fatalf("want no receipt mailed, got %d", n)
		}
		if r := b.receipt(t, ride); r == nil || r.MessageID != "<earlier@rocketrides.example>" {
			t.Fatalf("want the earlier receipt left as it was, got %+v", r)
		}
	})

	t.Run("SMTPFailureIsRetriedUntilItSucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.smtp.FailNext(2, "451 4.3.0 Try again later")
		ride := b.newRide(t, b.rider, "ch_receipt3")
		job := b.insertJob(t, receiptArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		row := b.jobRow(t, job.ID)
		if row.Attempt != 3 || len(row.Errors) != 2 || !strings.Contains(row.Errors[0].Error, "451") {
			t.Fatalf("want 2 failed attempts with the server's 451, then success; got attempt %d, errors %+v", row.Attempt, row.Errors)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 receipt accepted, got %d", n)
		}
		if b.receipt(t, ride) == nil {
			t.Fatal("want the receipt recorded")
		}
	})

	t.Run("KeepsFailingThenDiscarded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.smtp.FailNext(100, "554 5.7.1 Rejected")
		ride := b.newRide(t, b.rider, "ch_receipt4")
		opts := receiptArgs(ride).InsertOpts()
		opts.MaxAttempts = 3 // a test need not wait for ten
		job := b.insertJob(t, receiptArgs(ride), &opts)

		ev := b.waitFinal(t, job)
		if ev.Kind != river.EventKindJobFailed || ev.Job.State != rivertype.JobStateDiscarded {
			t.Fatalf("want the job discarded, got %s in state %s", ev.Kind, ev.Job.State)
		}
		row := b.jobRow(t, job.ID)
		if row.State != rivertype.JobStateDiscarded || len(row.Errors) != 3 || row.FinalizedAt == nil {
			t.Fatalf("want a discarded job with its 3 errors for an operator to see, got %s with %d errors", row.State, len(row.Errors))
		}
		if b.receipt(t, ride) != nil {
			t.Fatal("want no receipt recorded")
		}

		// A discarded job does not block re-enqueueing the receipt once the mail server is
		// fixed: uniqueness ignores discarded jobs.
		res, err := b.client.Insert(t.Context(), receiptArgs(ride), nil)
		if err != nil || res.UniqueSkippedAsDuplicate {
			t.Fatalf("want a new job for the ride inserted, got %+v, %v", res, err)
		}
	})

	t.Run("RideThatDoesNotExistIsCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.newRider(t)
		ride := b.newRide(t, other, "ch_receipt5")
		args := receiptArgs(ride)
		args.UserID = b.rider.ID // someone else's ride is no ride of this user
		job := b.insertJob(t, args, nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCancelled {
			t.Fatalf("want the job cancelled, not retried, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 0 {
			t.Fatalf("want nothing mailed, got %d", n)
		}
	})

	t.Run("UnchargedRideIsCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRide(t, b.rider, "")
		job := b.insertJob(t, receiptArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCancelled {
			t.Fatalf("want the job cancelled, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 0 {
			t.Fatalf("want nothing mailed, got %d", n)
		}
	})
}

func TestSendRideReceiptUniquePerRide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ride := b.newRide(t, b.rider, "ch_unique")
	other := b.newRide(t, b.rider, "ch_unique_other")

	first, err := b.client.Insert(t.Context(), receiptArgs(ride), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same ride with other args (a different amount) is still the same receipt.
	changed := receiptArgs(ride)
	changed.Amount = 999
	for _, args := range []jobargs.SendRideReceipt{receiptArgs(ride), changed} {
		res, err := b.client.Insert(t.Context(), args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.UniqueSkippedAsDuplicate || res.Job.ID != first.Job.ID {
			t.Fatalf("want %+v skipped as a duplicate of job %d, got job %d", args, first.Job.ID, res.Job.ID)
		}
	}
	// The enqueuer's path: decoded from staged_jobs and inserted with the returned options.
	jobArgs, opts, err := jobargs.DecodeStagedJob("send_ride_receipt", fmt.Appendf(nil, `{"ride_id":"%d","user_id":%d,"amount":2000,"currency":"usd"}`, ride.ID, b.rider.ID))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	results, err := b.client.InsertManyTx(t.Context(), tx, []river.InsertManyParams{{Args: jobArgs, InsertOpts: opts}})
	if err != nil {
		t.Fatal(err)
	}
	if !results[0].UniqueSkippedAsDuplicate {
		t.Fatal("want the staged job skipped as a duplicate")
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	if res, err := b.client.Insert(t.Context(), receiptArgs(other), nil); err != nil || res.UniqueSkippedAsDuplicate {
		t.Fatalf("want another ride's receipt inserted, got %+v, %v", res, err)
	}
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'send_ride_receipt' AND (args->>'ride_id')::bigint = $1`, ride.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("want 1 job for the ride, got %d", n)
	}
}
