package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

func TestSendRefundReceiptWorker(t *testing.T) {
	t.Parallel()

	t.Run("MailsRefundReceiptOnceAndRecordsItWithTheCompletion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRefundedRide(t, b.rider, "ch_refund1", "re_refund1")
		// Staged as the enqueuer stages it: the latency of a refund receipt is not observed all
		// the same, as rocketrides_receipt_latency_seconds runs from the booking.
		metadata, err := jobargs.AddStagedAt(nil, time.Now().Add(-time.Second))
		if err != nil {
			t.Fatal(err)
		}
		job := b.insertJob(t, refundArgs(ride), &river.InsertOpts{Metadata: metadata})

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}

		msgs := b.smtp.Messages()
		if len(msgs) != 1 {
			t.Fatalf("want 1 refund receipt mailed, got %d", len(msgs))
		}
		got := msgs[0]
		if len(got.To) != 1 || got.To[0] != b.rider.Email || got.From != "receipts@rocketrides.example" || !got.TLS {
			t.Errorf("unexpected envelope %q -> %q (TLS %t)", got.From, got.To, got.TLS)
		}
		parsed, err := got.Parse()
		if err != nil {
			t.Fatal(err)
		}
		wantID := refundReceiptMessageID(ride, "rocketrides.example")
		if id := parsed.Header.Get("Message-Id"); id != wantID || id == ReceiptMessageID(ride, "rocketrides.example") {
			t.Errorf("want Message-ID %s, other than the ride receipt's, got %s", wantID, id)
		}
		if subject := parsed.Header.Get("Subject"); !strings.Contains(subject, "refund") || !strings.Contains(subject, "$20.00") {
			t.Errorf("want a refund and its amount in the subject, got %q", subject)
		}
		text, err := got.Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"cancelled", "Refunded   $20.00 to your card", "Refund ID  re_refund1", fmt.Sprintf("#%d", ride.ID)} {
			if !strings.Contains(text, want) {
				t.Errorf("want the refund receipt to say %q, got:\n%s", want, text)
			}
		}

		if r := b.refundReceipt(t, ride); r == nil || r.MessageID != wantID {
			t.Fatalf("want the refund receipt recorded with its Message-ID, got %+v", r)
		}
		if b.receipt(t, ride) != nil {
			t.Error("want the ride's own receipt left unrecorded")
		}
		if row := b.jobRow(t, job.ID); row.State != rivertype.JobStateCompleted || row.Attempt != 1 {
			t.Errorf("want the job completed at the first attempt, got %s at attempt %d", row.State, row.Attempt)
		}
		var sameTx bool
		err = b.pool.QueryRow(t.Context(), `
			SELECT (SELECT xmin FROM rides WHERE id = $1)::text = (SELECT xmin FROM river_job WHERE id = $2)::text`,
			ride.ID, job.ID).Scan(&sameTx)
		if err != nil {
			t.Fatal(err)
		}
		if !sameTx {
			t.Error("want the refund receipt recorded in the transaction that completed the job")
		}

		b.requireReceipts(t, map[string]float64{metrics.ReceiptSent: 1})
		if n, _ := receiptLatencies(t, b.metrics); n != 0 {
			t.Fatalf("want no latency observed for a refund receipt, got %d", n)
		}
	})

	t.Run("SecondJobForTheRideSendsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRefundedRide(t, b.rider, "ch_refund2", "re_refund2")
		first := b.insertJob(t, refundArgs(ride), nil)
		if ev := b.waitFinal(t, first); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the first job completed, got %s", ev.Kind)
		}
		recorded := b.refundReceipt(t, ride)
		if recorded == nil {
			t.Fatal("want the refund receipt recorded")
		}

		// While the completed job is kept, a second is not even inserted.
		res, err := b.client.Insert(t.Context(), refundArgs(ride), nil)
		if err != nil || !res.UniqueSkippedAsDuplicate {
			t.Fatalf("want a second job for the ride skipped as a duplicate, got %+v, %v", res, err)
		}
		// Once River's cleaner deleted it, a second job runs, and finds the receipt recorded.
		if _, err := b.pool.Exec(t.Context(), `DELETE FROM river_job WHERE id = $1`, first.ID); err != nil {
			t.Fatal(err)
		}
		second := b.insertJob(t, refundArgs(ride), nil)
		if ev := b.waitFinal(t, second); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the second job completed, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 refund receipt mailed in all, got %d", n)
		}
		if again := b.refundReceipt(t, ride); again == nil || *again != *recorded {
			t.Fatalf("want the first refund receipt left as it was (%+v), got %+v", recorded, again)
		}
		b.requireReceipts(t, map[string]float64{metrics.ReceiptSent: 1})
	})

	// Two jobs for one ride at once both find no refund receipt recorded and both mail one; the
	// second to record it keeps the first's and says the rider may have two.
	t.Run("AnotherJobRecordedItMeanwhileKeepsTheFirst", func(t *testing.T) {
		t.Parallel()
		var logs proctest.SyncBuffer
		var refunded atomic.Pointer[models.Ride]
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			deps.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			// The other job records its refund receipt while this one's is being mailed.
			deps.Mailer = afterSend{Mailer: deps.Mailer, hook: func() {
				ride := refunded.Load()
				if _, err := models.RideRefundReceiptRecord(context.Background(), b.pool, ride.UserID, ride.ID, "<other-job@rocketrides.example>"); err != nil {
					t.Error(err)
				}
			}}
		})
		ride := b.newRefundedRide(t, b.rider, "ch_refund_raced", "re_refund_raced")
		refunded.Store(ride)
		job := b.insertJob(t, refundArgs(ride), nil)
		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		if r := b.refundReceipt(t, ride); r == nil || r.MessageID != "<other-job@rocketrides.example>" {
			t.Fatalf("want the other job's refund receipt left as it was, got %+v", r)
		}
		if !strings.Contains(logs.String(), "refund receipt was recorded by another job meanwhile") {
			t.Fatalf("want the second receipt logged, got %s", logs.String())
		}
	})

	t.Run("RecordedAlreadySendsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRefundedRide(t, b.rider, "ch_refund3", "re_refund3")
		if _, err := models.RideRefundReceiptRecord(t.Context(), b.pool, ride.UserID, ride.ID, "<earlier@rocketrides.example>"); err != nil {
			t.Fatal(err)
		}
		job := b.insertJob(t, refundArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 0 {
			t.Fatalf("want no refund receipt mailed, got %d", n)
		}
		if r := b.refundReceipt(t, ride); r == nil || r.MessageID != "<earlier@rocketrides.example>" {
			t.Fatalf("want the earlier refund receipt left as it was, got %+v", r)
		}
		b.requireReceipts(t, nil)
	})

	t.Run("SMTPFailureIsRetriedUntilItSucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.smtp.FailNext(1, "451 4.3.0 Try again later")
		ride := b.newRefundedRide(t, b.rider, "ch_refund4", "re_refund4")
		job := b.insertJob(t, refundArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		if row := b.jobRow(t, job.ID); row.Attempt != 2 || len(row.Errors) != 1 || !strings.Contains(row.Errors[0].Error, "error mailing refund receipt") {
			t.Fatalf("want 1 failed attempt mailing the refund receipt, then success; got attempt %d, errors %+v", row.Attempt, row.Errors)
		}
		if n := len(b.smtp.Messages()); n != 1 {
			t.Fatalf("want 1 refund receipt accepted, got %d", n)
		}
		if b.refundReceipt(t, ride) == nil {
			t.Fatal("want the refund receipt recorded")
		}
		b.requireReceipts(t, map[string]float64{metrics.ReceiptFailed: 1, metrics.ReceiptSent: 1})
	})

	t.Run("RideWithoutRefundIsCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.newRide(t, b.rider, "ch_not_refunded")
		job := b.insertJob(t, refundArgs(ride), nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCancelled {
			t.Fatalf("want the job cancelled, not retried, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 0 {
			t.Fatalf("want nothing mailed, got %d", n)
		}
		if b.refundReceipt(t, ride) != nil {
			t.Fatal("want no refund receipt recorded")
		}
		b.requireReceipts(t, map[string]float64{metrics.ReceiptCancelled: 1})
	})

	t.Run("RideThatDoesNotExistIsCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.newRider(t)
		ride := b.newRefundedRide(t, other, "ch_refund5", "re_refund5")
		args := refundArgs(ride)
		args.UserID = b.rider.ID // someone else's ride is no ride of this user
		job := b.insertJob(t, args, nil)

		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCancelled {
			t.Fatalf("want the job cancelled, not retried, got %s", ev.Kind)
		}
		if n := len(b.smtp.Messages()); n != 0 {
			t.Fatalf("want nothing mailed, got %d", n)
		}
	})
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

// refundArgs are the args a cancel stages for ride: its whole charge refunded.
func refundArgs(ride *models.Ride) jobargs.SendRefundReceipt {
	return jobargs.SendRefundReceipt{RideID: ride.ID, UserID: ride.UserID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency}
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
