package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/models"
)

// receiptUnderTest is one of a ride's two receipts, the charge's or the refund's, as the table of
// TestReceiptWorkers drives it: every case runs once with each.
type receiptUnderTest struct {
	name    string // the subtest's name
	logName string // the receipt's name in the worker's log lines
	jobKind string

	// newRide inserts a ride of user that has this receipt to send; its Stripe ids end in id.
	newRide func(b *testBundle, t *testing.T, user *models.User, id string) *models.Ride

	// nothingToReceipt inserts a ride of the bundle's rider that has no such receipt.
	nothingToReceipt func(b *testBundle, t *testing.T) *models.Ride

	// args are the job's args for r.
	args func(r jobargs.Receipt) receiptJobArgs

	messageID func(ride *models.Ride, domain string) string
	subject   []string                                    // what the subject says
	text      func(ride *models.Ride, id string) []string // what the body says

	// recorded returns the receipt recorded for ride, or nil; record records one as another job
	// would.
	recorded func(b *testBundle, t *testing.T, ride *models.Ride) *models.RideReceipt
	record   func(ctx context.Context, db models.DBTX, userID, rideID int64, messageID string) (*models.RideReceipt, error)

	// latencyObserved says whether rocketrides_receipt_latency_seconds times this receipt: it
	// runs from a booking, and the cancel stages a refund receipt.
	latencyObserved bool
}

type receiptJobArgs interface {
	river.JobArgs
	river.JobArgsWithInsertOpts
}

var receiptsUnderTest = []receiptUnderTest{
	{
		name:    "Ride",
		logName: "receipt",
		jobKind: jobargs.SendRideReceiptKind,
		newRide: func(b *testBundle, t *testing.T, user *models.User, id string) *models.Ride {
			return b.newRide(t, user, "ch_"+id)
		},
		nothingToReceipt: func(b *testBundle, t *testing.T) *models.Ride {
			return b.newRide(t, b.rider, "") // never charged
		},
		args:      func(r jobargs.Receipt) receiptJobArgs { return jobargs.SendRideReceipt(r) },
		messageID: ReceiptMessageID,
		subject:   []string{"receipt", "$20.00"},
		text: func(ride *models.Ride, id string) []string {
			return []string{"Charged    $20.00", "Charge ID  ch_" + id, fmt.Sprintf("#%d", ride.ID), "37.77490, -122.41940"}
		},
		recorded:        (*testBundle).receipt,
		record:          models.RideReceiptRecord,
		latencyObserved: true,
	},
	{
		name:    "Refund",
		logName: "refund receipt",
		jobKind: jobargs.SendRefundReceiptKind,
		newRide: func(b *testBundle, t *testing.T, user *models.User, id string) *models.Ride {
			return b.newRefundedRide(t, user, "ch_"+id, "re_"+id)
		},
		nothingToReceipt: func(b *testBundle, t *testing.T) *models.Ride {
			return b.newRide(t, b.rider, "ch_not_refunded") // charged, never refunded
		},
		args:      func(r jobargs.Receipt) receiptJobArgs { return jobargs.SendRefundReceipt(r) },
		messageID: refundReceipt.messageID,
		subject:   []string{"refund", "$20.00"},
		text: func(ride *models.Ride, id string) []string {
			return []string{"cancelled", "Refunded   $20.00 to your card", "Refund ID  re_" + id, fmt.Sprintf("#%d", ride.ID)}
		},
		recorded: (*testBundle).refundReceipt,
		record:   models.RideRefundReceiptRecord,
	},
}

// TestReceiptWorkers runs each case with each receipt: the two workers share their send and
// record, and so their behaviour.
func TestReceiptWorkers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		test func(t *testing.T, k receiptUnderTest)
	}{
		{"MailsOnceAndRecordsItWithTheCompletion", testMailsOnceAndRecordsItWithTheCompletion},
		{"RecordsOnTheConnectionItHeldWhileSending", testRecordsOnTheConnectionItHeldWhileSending},
		{"RecordsOnANewConnectionWhenTheDatabaseDroppedItsOwn", testRecordsOnANewConnectionWhenTheDatabaseDroppedItsOwn},
		{"RecordsOnANewConnectionWhenItsOwnHangs", testRecordsOnANewConnectionWhenItsOwnHangs},
		{"RecordsOnceWhenTheCommitsAnswerIsLost", testRecordsOnceWhenTheCommitsAnswerIsLost},
		{"LogSaysSentOrLogged", testLogSaysSentOrLogged},
		{"RecordedAlreadySendsNothing", testRecordedAlreadySendsNothing},
		{"SecondJobForTheRideSendsNothing", testSecondJobForTheRideSendsNothing},
		{"AnotherJobRecordedItMeanwhileKeepsTheFirst", testAnotherJobRecordedItMeanwhileKeepsTheFirst},
		{"SMTPFailureIsRetriedUntilItSucceeds", testSMTPFailureIsRetriedUntilItSucceeds},
		{"KeepsFailingThenDiscarded", testKeepsFailingThenDiscarded},
		{"RideThatDoesNotExistIsCancelled", testRideThatDoesNotExistIsCancelled},
		{"RideWithNothingToReceiptIsCancelled", testRideWithNothingToReceiptIsCancelled},
		{"UniquePerRide", testUniquePerRide},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, k := range receiptsUnderTest {
				t.Run(k.name, func(t *testing.T) {
					t.Parallel()
					tc.test(t, k)
				})
			}
		})
	}
}

func testMailsOnceAndRecordsItWithTheCompletion(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	ride := k.newRide(b, t, b.rider, "once")
	// Staged as the enqueuer stages it, so that the latency is known.
	metadata, err := jobargs.AddStagedAt(nil, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	job := b.insertJob(t, k.args(receiptOf(ride)), &river.InsertOpts{Metadata: metadata})

	b.requireFinal(t, job, river.EventKindJobCompleted)

	msgs := b.smtp.Messages()
	if len(msgs) != 1 {
		t.Fatalf("want 1 %s mailed, got %d", k.logName, len(msgs))
	}
	got := msgs[0]
	if len(got.To) != 1 || got.To[0] != b.rider.Email || got.From != "receipts@rocketrides.example" || !got.TLS {
		t.Errorf("unexpected envelope %q -> %q (TLS %t)", got.From, got.To, got.TLS)
	}
	parsed, err := got.Parse()
	if err != nil {
		t.Fatal(err)
	}
	wantID := k.messageID(ride, "rocketrides.example")
	if id := parsed.Header.Get("Message-Id"); id != wantID {
		t.Errorf("want Message-ID %s, got %s", wantID, id)
	}
	for _, other := range receiptsUnderTest {
		if other.name != k.name && other.messageID(ride, "rocketrides.example") == wantID {
			t.Errorf("want a Message-ID other than the %s's, got %s for both", other.logName, wantID)
		}
	}
	subject := parsed.Header.Get("Subject")
	for _, want := range k.subject {
		if !strings.Contains(subject, want) {
			t.Errorf("want the subject to say %q, got %q", want, subject)
		}
	}
	text, err := got.Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range k.text(ride, "once") {
		if !strings.Contains(text, want) {
			t.Errorf("want the %s to say %q, got:\n%s", k.logName, want, text)
		}
	}

	if r := k.recorded(b, t, ride); r == nil || r.MessageID != wantID {
		t.Fatalf("want the %s recorded with its Message-ID, got %+v", k.logName, r)
	}
	for _, other := range receiptsUnderTest {
		if other.name != k.name && other.recorded(b, t, ride) != nil {
			t.Errorf("want the %s left unrecorded", other.logName)
		}
	}
	if row := b.jobRow(t, job.ID); row.State != rivertype.JobStateCompleted || row.Attempt != 1 {
		t.Errorf("want the job completed at the first attempt, got %s at attempt %d", row.State, row.Attempt)
	}
	// Rows written by one transaction carry its id in xmin: the receipt and the job's completion
	// were committed together, not one after the other.
	var sameTx bool
	err = b.pool.QueryRow(t.Context(), `
		SELECT (SELECT xmin FROM rides WHERE id = $1)::text = (SELECT xmin FROM river_job WHERE id = $2)::text`,
		ride.ID, job.ID).Scan(&sameTx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameTx {
		t.Errorf("want the %s recorded in the transaction that completed the job", k.logName)
	}

	b.requireReceipts(t, map[string]float64{metrics.ReceiptSent: 1})
	want := uint64(0)
	if k.latencyObserved {
		want = 1
	}
	if n, _ := receiptLatencies(t, b.metrics); n != want {
		t.Fatalf("want %d latencies observed, got %d", want, n)
	}
}

// A busy worker: once the receipt is at the mail server, the process's other jobs hold every
// connection of the pool. Recording must not wait for one of them, or it times out, the job is
// retried, and the rider gets a second receipt.
func testRecordsOnTheConnectionItHeldWhileSending(t *testing.T, k receiptUnderTest) {
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
	ride := k.newRide(b, t, b.rider, "busy")
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	b.requireFinal(t, job, river.EventKindJobCompleted)
	if n := hog.numTaken(); n != maxConns-1 {
		t.Fatalf("want the other jobs to have held %d connections, all but the job's, got %d", maxConns-1, n)
	}
	b.requireMailedAndRecordedOnce(t, k, job, ride)
}

func testRecordsOnANewConnectionWhenTheDatabaseDroppedItsOwn(t *testing.T, k receiptUnderTest) {
	var cut atomic.Int64
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
		// A database restart, as the server accepts the message: every connection dies. Only
		// this test's: the cluster is the package's, and the test with the other receipt runs
		// beside it under the same name. Cutting its job's connection before the mail failed
		// that job's first attempt.
		deps.Mailer = afterSend{Mailer: deps.Mailer, hook: func() {
			var n int
			if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = 'receipt_workers_under_test' AND datname = current_database()`).Scan(&n); err != nil {
				t.Error(err)
			}
			cut.Add(int64(n))
		}}
	})
	ride := k.newRide(b, t, b.rider, "restart")
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	b.requireFinal(t, job, river.EventKindJobCompleted)
	if cut.Load() == 0 {
		t.Fatal("want the workers' connections cut as the message went out, found none")
	}
	b.requireMailedAndRecordedOnce(t, k, job, ride)
}

// A primary that froze as the server accepted the message: the worker's connections to it
// answer nothing. The try on the job's own connection gives up after recordAttemptTimeout, and
// the next, on a connection dialled for it, records the receipt: mailed once.
func testRecordsOnANewConnectionWhenItsOwnHangs(t *testing.T, k receiptUnderTest) {
	primary := &freezer{}
	b := setupWith(t, func(b *testBundle, deps *Deps) {
		deps.Pool = primary.pool(t, b.pool.Config())
		deps.Mailer = afterSend{Mailer: deps.Mailer, hook: primary.freeze}
	})
	ride := k.newRide(b, t, b.rider, "frozen")
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	// River's own connections are frozen too, so the job's end is read from the table.
	deadline := time.Now().Add(RecordTimeout + 30*time.Second)
	for k.recorded(b, t, ride) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no %s recorded within %s of the freeze", k.logName, RecordTimeout+30*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if primary.numFrozen() == 0 {
		t.Fatal("want the workers' connections frozen, found none")
	}
	b.requireCompletedOnceFromTheTable(t, job)
	if n := len(b.smtp.Messages()); n != 1 {
		t.Fatalf("want 1 %s mailed, got %d", k.logName, n)
	}
}

// The commit that records the receipt goes through, and its answer is lost (the primary froze
// right after): the retry finds the job completed by that commit, says so, and neither records it
// again nor mails it again.
func testRecordsOnceWhenTheCommitsAnswerIsLost(t *testing.T, k receiptUnderTest) {
	primary := &freezer{}
	var logs proctest.SyncBuffer
	b := setupWith(t, func(b *testBundle, deps *Deps) {
		deps.Pool = primary.pool(t, b.pool.Config())
		deps.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		deps.Mailer = afterSend{Mailer: deps.Mailer, hook: primary.freezeAfterCommit}
	})
	ride := k.newRide(b, t, b.rider, "answer_lost")
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	deadline := time.Now().Add(RecordTimeout + 30*time.Second)
	for !strings.Contains(logs.String(), `msg="Worker: sent `+k.logName+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not finish the %s within %s:\n%s", k.logName, RecordTimeout+30*time.Second, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), k.logName+" was recorded by an earlier try") || strings.Contains(logs.String(), "recorded by another job") {
		t.Fatalf("want the earlier try's commit found as this job's, got:\n%s", logs.String())
	}
	b.requireCompletedOnceFromTheTable(t, job)
	if k.recorded(b, t, ride) == nil {
		t.Errorf("want the %s recorded", k.logName)
	}
	if n := len(b.smtp.Messages()); n != 1 {
		t.Fatalf("want 1 %s mailed, got %d", k.logName, n)
	}
}

// The worker's log says what became of the receipt: sent through SMTP, or only logged by the
// mailer of a machine without SMTP_URL, which no rider receives.
func testLogSaysSentOrLogged(t *testing.T, k receiptUnderTest) {
	for _, smtp := range []bool{true, false} {
		var logs, mailLog proctest.SyncBuffer
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			deps.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			if !smtp {
				deps.Mailer = mailer.NewLog(slog.New(slog.NewTextHandler(&mailLog, nil)))
			}
		})
		ride := k.newRide(b, t, b.rider, "log")
		job := b.insertJob(t, k.args(receiptOf(ride)), nil)
		b.requireFinal(t, job, river.EventKindJobCompleted)

		sent := strings.Contains(logs.String(), `msg="Worker: sent `+k.logName+`"`)
		logged := strings.Contains(logs.String(), `msg="Worker: logged `+k.logName)
		mailed := len(b.smtp.Messages()) == 1
		inMailLog := strings.Contains(mailLog.String(), "Mailer: logged message")
		if sent != smtp || logged == smtp || mailed != smtp || inMailLog == smtp {
			t.Fatalf("smtp=%t: want sent=%t, got sent=%t logged=%t mailed=%t in the mail log=%t; worker log:\n%s",
				smtp, smtp, sent, logged, mailed, inMailLog, logs.String())
		}
	}
}

func testRecordedAlreadySendsNothing(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	ride := k.newRide(b, t, b.rider, "recorded")
	if _, err := k.record(t.Context(), b.pool, ride.UserID, ride.ID, "<earlier@rocketrides.example>"); err != nil {
		t.Fatal(err)
	}
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	b.requireFinal(t, job, river.EventKindJobCompleted)
	if n := len(b.smtp.Messages()); n != 0 {
		t.Fatalf("want no %s mailed, got %d", k.logName, n)
	}
	if r := k.recorded(b, t, ride); r == nil || r.MessageID != "<earlier@rocketrides.example>" {
		t.Fatalf("want the earlier %s left as it was, got %+v", k.logName, r)
	}
	b.requireReceipts(t, nil)
}

func testSecondJobForTheRideSendsNothing(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	ride := k.newRide(b, t, b.rider, "second")
	first := b.insertJob(t, k.args(receiptOf(ride)), nil)
	b.requireFinal(t, first, river.EventKindJobCompleted)
	recorded := k.recorded(b, t, ride)
	if recorded == nil {
		t.Fatalf("want the %s recorded", k.logName)
	}

	// While the completed job is kept, a second is not even inserted.
	res, err := b.client.Insert(t.Context(), k.args(receiptOf(ride)), nil)
	if err != nil || !res.UniqueSkippedAsDuplicate {
		t.Fatalf("want a second job for the ride skipped as a duplicate, got %+v, %v", res, err)
	}
	// Once River's cleaner deleted it, a second job runs, and finds the receipt recorded.
	if _, err := b.pool.Exec(t.Context(), `DELETE FROM river_job WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	second := b.insertJob(t, k.args(receiptOf(ride)), nil)
	b.requireFinal(t, second, river.EventKindJobCompleted)
	if n := len(b.smtp.Messages()); n != 1 {
		t.Fatalf("want 1 %s mailed in all, got %d", k.logName, n)
	}
	if again := k.recorded(b, t, ride); again == nil || *again != *recorded {
		t.Fatalf("want the first %s left as it was (%+v), got %+v", k.logName, recorded, again)
	}
	b.requireReceipts(t, map[string]float64{metrics.ReceiptSent: 1})
}

// Two jobs for one ride at once both find no receipt recorded and both mail one. The second to
// record it keeps the first's and says the rider may have two.
func testAnotherJobRecordedItMeanwhileKeepsTheFirst(t *testing.T, k receiptUnderTest) {
	var logs proctest.SyncBuffer
	var mailed atomic.Pointer[models.Ride]
	b := setupWith(t, func(b *testBundle, deps *Deps) {
		deps.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		// The other job records its receipt while this one's is being mailed.
		deps.Mailer = afterSend{Mailer: deps.Mailer, hook: func() {
			ride := mailed.Load()
			if _, err := k.record(context.Background(), b.pool, ride.UserID, ride.ID, "<other-job@rocketrides.example>"); err != nil {
				t.Error(err)
			}
		}}
	})
	ride := k.newRide(b, t, b.rider, "raced")
	mailed.Store(ride)
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)
	b.requireFinal(t, job, river.EventKindJobCompleted)
	if r := k.recorded(b, t, ride); r == nil || r.MessageID != "<other-job@rocketrides.example>" {
		t.Fatalf("want the other job's %s left as it was, got %+v", k.logName, r)
	}
	if !strings.Contains(logs.String(), `msg="Worker: `+k.logName+` was recorded by another job meanwhile`) {
		t.Fatalf("want the second %s logged, got %s", k.logName, logs.String())
	}
}

func testSMTPFailureIsRetriedUntilItSucceeds(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	b.smtp.FailNext(2, "451 4.3.0 Try again later")
	ride := k.newRide(b, t, b.rider, "retried")
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	b.requireFinal(t, job, river.EventKindJobCompleted)
	row := b.jobRow(t, job.ID)
	if row.Attempt != 3 || len(row.Errors) != 2 {
		t.Fatalf("want 2 failed attempts, then success; got attempt %d, errors %+v", row.Attempt, row.Errors)
	}
	for _, e := range row.Errors {
		if !strings.Contains(e.Error, "error mailing "+k.logName+" of ride") || !strings.Contains(e.Error, "451") {
			t.Fatalf("want each failure to say it was the %s's mail and give the server's 451, got %q", k.logName, e.Error)
		}
	}
	if n := len(b.smtp.Messages()); n != 1 {
		t.Fatalf("want 1 %s accepted, got %d", k.logName, n)
	}
	if k.recorded(b, t, ride) == nil {
		t.Fatalf("want the %s recorded", k.logName)
	}
	b.requireReceipts(t, map[string]float64{metrics.ReceiptFailed: 2, metrics.ReceiptSent: 1})
}

func testKeepsFailingThenDiscarded(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	b.smtp.FailNext(100, "554 5.7.1 Rejected")
	ride := k.newRide(b, t, b.rider, "discarded")
	args := k.args(receiptOf(ride))
	opts := args.InsertOpts()
	opts.MaxAttempts = 3 // a test need not wait for ten
	job := b.insertJob(t, args, &opts)

	ev := b.waitFinal(t, job)
	if ev.Kind != river.EventKindJobFailed || ev.Job.State != rivertype.JobStateDiscarded {
		t.Fatalf("want the job discarded, got %s in state %s", ev.Kind, ev.Job.State)
	}
	row := b.jobRow(t, job.ID)
	if row.State != rivertype.JobStateDiscarded || len(row.Errors) != 3 || row.FinalizedAt == nil {
		t.Fatalf("want a discarded job with its 3 errors for an operator to see, got %s with %d errors", row.State, len(row.Errors))
	}
	if k.recorded(b, t, ride) != nil {
		t.Fatalf("want no %s recorded", k.logName)
	}

	// A discarded job does not block re-enqueueing the receipt once the mail server is fixed:
	// uniqueness ignores discarded jobs.
	res, err := b.client.Insert(t.Context(), args, nil)
	if err != nil || res.UniqueSkippedAsDuplicate {
		t.Fatalf("want a new job for the ride inserted, got %+v, %v", res, err)
	}
}

func testRideThatDoesNotExistIsCancelled(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	other := b.newRider(t)
	ride := k.newRide(b, t, other, "someone_elses")
	args := receiptOf(ride)
	args.UserID = b.rider.ID // someone else's ride is no ride of this user
	job := b.insertJob(t, k.args(args), nil)

	b.requireFinal(t, job, river.EventKindJobCancelled)
	if n := len(b.smtp.Messages()); n != 0 {
		t.Fatalf("want nothing mailed, got %d", n)
	}
	b.requireReceipts(t, map[string]float64{metrics.ReceiptCancelled: 1})
}

// A ride never charged has no receipt, and a ride never refunded no refund receipt: no retry can
// change that, so the job is cancelled.
func testRideWithNothingToReceiptIsCancelled(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	ride := k.nothingToReceipt(b, t)
	job := b.insertJob(t, k.args(receiptOf(ride)), nil)

	b.requireFinal(t, job, river.EventKindJobCancelled)
	if n := len(b.smtp.Messages()); n != 0 {
		t.Fatalf("want nothing mailed, got %d", n)
	}
	if k.recorded(b, t, ride) != nil {
		t.Fatalf("want no %s recorded", k.logName)
	}
	b.requireReceipts(t, map[string]float64{metrics.ReceiptCancelled: 1})
}

func testUniquePerRide(t *testing.T, k receiptUnderTest) {
	b := setup(t)
	ride := k.newRide(b, t, b.rider, "unique")
	other := k.newRide(b, t, b.rider, "unique_other")

	first, err := b.client.Insert(t.Context(), k.args(receiptOf(ride)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same ride with other args (a different amount) is still the same receipt.
	changed := receiptOf(ride)
	changed.Amount = 999
	for _, args := range []receiptJobArgs{k.args(receiptOf(ride)), k.args(changed)} {
		res, err := b.client.Insert(t.Context(), args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.UniqueSkippedAsDuplicate || res.Job.ID != first.Job.ID {
			t.Fatalf("want %+v skipped as a duplicate of job %d, got job %d", args, first.Job.ID, res.Job.ID)
		}
	}
	// The enqueuer's path: decoded from staged_jobs and inserted with the returned options.
	jobArgs, opts, err := jobargs.DecodeStagedJob(k.jobKind, fmt.Appendf(nil, `{"ride_id":"%d","user_id":%d,"amount":2000,"currency":"usd"}`, ride.ID, b.rider.ID))
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

	if res, err := b.client.Insert(t.Context(), k.args(receiptOf(other)), nil); err != nil || res.UniqueSkippedAsDuplicate {
		t.Fatalf("want another ride's %s inserted, got %+v, %v", k.logName, res, err)
	}
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = $1 AND (args->>'ride_id')::bigint = $2`,
		k.jobKind, ride.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("want 1 job for the ride, got %d", n)
	}
}

// requireFinal fails t unless job ends as want: completed, or cancelled rather than retried.
func (b *testBundle) requireFinal(t *testing.T, job *rivertype.JobRow, want river.EventKind) {
	t.Helper()
	if ev := b.waitFinal(t, job); ev.Kind != want {
		t.Fatalf("want job %d to end %s, got %s", job.ID, want, ev.Kind)
	}
}

// requireMailedAndRecordedOnce fails t unless ride's receipt of kind k was mailed once and
// recorded, and job completed at its first attempt.
func (b *testBundle) requireMailedAndRecordedOnce(t *testing.T, k receiptUnderTest, job *rivertype.JobRow, ride *models.Ride) {
	t.Helper()
	if n := len(b.smtp.Messages()); n != 1 {
		t.Fatalf("want 1 %s mailed, not a second on a retry, got %d", k.logName, n)
	}
	if row := b.jobRow(t, job.ID); row.State != rivertype.JobStateCompleted || row.Attempt != 1 {
		t.Errorf("want the job completed at the first attempt, got %s at attempt %d", row.State, row.Attempt)
	}
	if k.recorded(b, t, ride) == nil {
		t.Fatalf("want the %s recorded", k.logName)
	}
}

// requireCompletedOnceFromTheTable fails t unless job completed at its first attempt, as
// river_job says: River's own connections may be frozen.
func (b *testBundle) requireCompletedOnceFromTheTable(t *testing.T, job *rivertype.JobRow) {
	t.Helper()
	var state string
	var attempt int
	if err := b.pool.QueryRow(t.Context(), `SELECT state, attempt FROM river_job WHERE id = $1`, job.ID).Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	if state != string(rivertype.JobStateCompleted) || attempt != 1 {
		t.Errorf("want the job completed at its first attempt, got %s at attempt %d", state, attempt)
	}
}

// newRefundedRide inserts a ride of user charged with chargeID and cancelled with refund
// refundID, as a cancel leaves it.
func (b *testBundle) newRefundedRide(t *testing.T, user *models.User, chargeID, refundID string) *models.Ride {
	t.Helper()
	ride := b.newRide(t, user, chargeID)
	if _, err := b.pool.Exec(t.Context(), `UPDATE rides SET stripe_refund_id = $2, status = 'cancelled' WHERE id = $1`,
		ride.ID, refundID); err != nil {
		t.Fatal(err)
	}
	ride, err := models.RideGetByIDForUser(t.Context(), b.pool, ride.ID, user.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ride
}

// refundReceipt returns the refund receipt recorded for ride, or nil.
func (b *testBundle) refundReceipt(t *testing.T, ride *models.Ride) *models.RideReceipt {
	t.Helper()
	r := models.RideReceipt{RideID: ride.ID}
	err := b.pool.QueryRow(t.Context(), `
		SELECT refund_receipt_message_id, refund_receipt_sent_at FROM rides
		WHERE id = $1 AND refund_receipt_sent_at IS NOT NULL`, ride.ID).Scan(&r.MessageID, &r.SentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{2000, "usd", "$20.00"},
		{2000, "USD", "$20.00"},
		{5, "usd", "$0.05"},
		{0, "usd", "$0.00"},
		{123456789, "usd", "$1,234,567.89"},
		{-2000, "usd", "-$20.00"},
		{550, "eur", "€5.50"},
		{999, "gbp", "£9.99"},
		{500, "jpy", "¥500"},
		{1500000, "krw", "1,500,000 KRW"},
		{2000, "chf", "20.00 CHF"},
	} {
		if got := formatAmount(tt.amount, tt.currency); got != tt.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", tt.amount, tt.currency, got, tt.want)
		}
	}
}

// TestReceiptMessages pins what each receipt says: its addresses, subject, Message-ID and the
// lines of its body.
func TestReceiptMessages(t *testing.T) {
	t.Parallel()
	const from, domain = "Rocket Rides <receipts@rocketrides.example>", "rocketrides.example"
	charge, refund := "ch_123", "re_456"
	user := &models.User{ID: 7, Email: "rider@example.com"}
	args := jobargs.Receipt{RideID: 123, UserID: 7, Amount: 2000, Currency: "usd"}
	newRide := func() *models.Ride {
		return &models.Ride{
			ID: 123, CreatedAt: time.Date(2024, 3, 1, 12, 30, 0, 123456000, time.UTC),
			OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.8044, TargetLon: -122.2712,
			StripeChargeID: &charge, StripeRefundID: &refund, UserID: 7,
		}
	}
	rideLines := []string{
		"Ride       #123, 1 March 2024, 12:30 UTC\n",
		"From       37.77490, -122.41940\n",
		"To         37.80440, -122.27120\n",
	}
	for _, tt := range []struct {
		name      string
		kind      *receiptKind
		subject   string
		messageID string
		body      []string
	}{
		{"Ride", rideReceipt, "Your Rocket Rides receipt: $20.00 for ride #123",
			"<ride-123.1709296200123456.receipt@rocketrides.example>",
			append(slices.Clone(rideLines), "Charged    $20.00 to your card on file\n", "Charge ID  ch_123\n")},
		{"Refund", refundReceipt, "Your Rocket Rides refund: $20.00 for ride #123",
			"<ride-123.1709296200123456.refund-receipt@rocketrides.example>",
			append(slices.Clone(rideLines), "Your ride was cancelled", "Refunded   $20.00 to your card on file\n",
				"Refund ID  re_456\n", "quote the refund ID")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ride := newRide()
			m := tt.kind.message(ride, user, args, from, domain)
			if m.To != "rider@example.com" || m.From != from {
				t.Errorf("unexpected addresses %q -> %q", m.From, m.To)
			}
			if m.Subject != tt.subject {
				t.Errorf("unexpected subject %q", m.Subject)
			}
			if m.MessageID != tt.messageID {
				t.Errorf("unexpected Message-ID %q", m.MessageID)
			}
			for _, want := range tt.body {
				if !strings.Contains(m.Body, want) {
					t.Errorf("want the body to contain %q, got:\n%s", want, m.Body)
				}
			}
			// Every attempt at this ride's receipt gets the same Message-ID; a ride with the same
			// id in another database (created at another time) gets another.
			again := tt.kind.message(ride, user, args, from, domain)
			other := *ride
			other.CreatedAt = other.CreatedAt.Add(time.Microsecond)
			if again.MessageID != m.MessageID || tt.kind.message(&other, user, args, from, domain).MessageID == m.MessageID {
				t.Error("want the Message-ID stable for a ride and different for another ride with the same id")
			}
		})
	}
}
