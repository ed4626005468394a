package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/stagedat"
	"github.com/rocketrides/rocketrides/models"
)

// RecordTimeout bounds recording a receipt that has been sent. That step ignores the job's
// cancellation (see Work), so it needs a bound of its own; a healthy database takes
// milliseconds.
const RecordTimeout = 10 * time.Second

// SendRideReceiptWorker emails the receipt of a charged ride and records it on the ride, in the
// transaction that completes the job, so that a job finding its receipt recorded sends nothing.
// Sending stays at least once, as mail and Postgres share no transaction; the package doc says
// where the window lies and how Work keeps it short.
type SendRideReceiptWorker struct {
	river.WorkerDefaults[jobargs.SendRideReceipt]

	pool            *pgxpool.Pool
	mailer          mailer.Mailer
	mailFrom        string
	messageIDDomain string
	logger          *slog.Logger

	// handedOver counts receipts handed to the mailer and recorded: rocketrides_receipts_total
	// with result sent, or logged for a mailer that only logs (see metrics.go).
	handedOver prometheus.Counter

	// latency observes, for each receipt counted sent, how long it took from the booking to
	// the mail server (see receiptLatency).
	latency prometheus.Observer
}

// Work sends the receipt unless it was recorded already. An SMTP failure is returned, so River
// retries with backoff; a job that cannot ever succeed (its ride is gone or was never charged)
// is cancelled instead.
func (w *SendRideReceiptWorker) Work(ctx context.Context, job *river.Job[jobargs.SendRideReceipt]) error {
	started := time.Now()

	// Held from the first query to the commit that records the receipt, so that recording never
	// waits for a connection that other jobs took meanwhile (see the package doc).
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring a database connection: %w", err)
	}
	defer conn.Release()

	args := job.Args
	ride, err := models.RideGetByIDForUser(ctx, conn, args.RideID, args.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("no ride %d of user %d to send a receipt for: %w", args.RideID, args.UserID, err))
	}
	if err != nil {
		return err
	}
	if ride.StripeChargeID == nil {
		return river.JobCancel(fmt.Errorf("ride %d was never charged, so it has no receipt", ride.ID))
	}

	sent, err := models.RideReceiptGet(ctx, conn, ride.ID)
	if err == nil {
		w.logger.InfoContext(ctx, "Worker: receipt already recorded, not sending it again",
			slog.Int64("ride_id", ride.ID), slog.String("message_id", sent.MessageID),
			slog.Time("sent_at", sent.SentAt), slog.Int64("job_id", job.ID))
		return nil
	}
	if !errors.Is(err, models.ErrNotFound) {
		return err
	}

	user, err := models.UserGetByID(ctx, conn, args.UserID)
	if err != nil {
		return err
	}
	if _, err := mail.ParseAddress(user.Email); err != nil {
		return river.JobCancel(fmt.Errorf("user %d has an email address no mail server takes: %w", user.ID, err))
	}

	msg := receiptMessage(ride, user, args, w.mailFrom, w.messageIDDomain)
	if err := w.mailer.Send(ctx, msg); err != nil {
		return fmt.Errorf("error mailing receipt of ride %d: %w", ride.ID, err)
	}
	latency, latencyKnown := receiptLatency(job.JobRow, time.Since(started))

	// The message is out. From here on the job's cancellation (a shutdown) is ignored: giving
	// up now would only leave the receipt unrecorded and mail it again on the retry.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RecordTimeout)
	defer cancel()
	raced, err := w.record(recordCtx, conn, job, ride.ID, msg.MessageID)
	for attempt := 1; err != nil && models.IsUnavailable(err); attempt++ {
		// The database went away (a restart, a failover) while the message was out: keep trying
		// on a fresh connection, for as long as RecordTimeout allows, rather than fail the job
		// and mail the receipt again on its retry.
		w.logger.WarnContext(ctx, "Worker: receipt mailed but not recorded yet; retrying on a new connection",
			slog.Int64("ride_id", ride.ID), slog.Int("attempt", attempt), slog.String("error", err.Error()))
		select {
		case <-recordCtx.Done():
			return fmt.Errorf("error recording receipt of ride %d: %w", ride.ID, err)
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		}
		raced, err = w.recordOnNewConnection(recordCtx, job, ride.ID, msg.MessageID)
	}
	if err != nil {
		return err
	}
	w.handedOver.Inc()
	if latencyKnown && w.mailer.Delivers() {
		w.latency.Observe(latency.Seconds())
	}
	if raced {
		w.logger.WarnContext(ctx, "Worker: receipt was recorded by another job meanwhile; the rider may have it twice",
			slog.Int64("ride_id", ride.ID), slog.String("message_id", msg.MessageID), slog.Int64("job_id", job.ID))
		return nil
	}
	// A receipt that went only to the log (no SMTP_URL) reached no rider, and an operator
	// reading "sent" would believe it had.
	logMsg := "Worker: sent receipt"
	if !w.mailer.Delivers() {
		logMsg = "Worker: logged receipt, not sent (SMTP_URL unset)"
	}
	w.logger.InfoContext(ctx, logMsg,
		slog.Int64("ride_id", ride.ID), slog.Int64("user_id", user.ID), slog.String("message_id", msg.MessageID),
		slog.Int64("job_id", job.ID), slog.Int("attempt", job.Attempt))
	return nil
}

// recordOnNewConnection is record on a connection fresh from the pool.
func (w *SendRideReceiptWorker) recordOnNewConnection(ctx context.Context, job *river.Job[jobargs.SendRideReceipt], rideID int64, messageID string) (bool, error) {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("error acquiring a database connection: %w", err)
	}
	defer conn.Release()
	return w.record(ctx, conn, job, rideID, messageID)
}

// record records the receipt and completes the job in one transaction on conn, so that a
// receipt is recorded exactly when its job is done. raced reports that another job had recorded
// a receipt for the ride first; the job is completed all the same.
func (w *SendRideReceiptWorker) record(ctx context.Context, conn *pgxpool.Conn, job *river.Job[jobargs.SendRideReceipt], rideID int64, messageID string) (raced bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("error beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit

	if _, err := models.RideReceiptRecord(ctx, tx, rideID, messageID); errors.Is(err, models.ErrNotFound) {
		raced = true
	} else if err != nil {
		return false, err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return false, fmt.Errorf("error completing job %d: %w", job.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("error committing receipt of ride %d: %w", rideID, err)
	}
	return raced, nil
}

// receiptLatency is how long job's receipt took from its booking to the mail server, given that
// the server accepted it sinceStart after Work began; the package doc says why it is free of
// clock skew. false for a job that does not say when it was staged: one inserted by something
// other than the enqueuer.
func receiptLatency(job *rivertype.JobRow, sinceStart time.Duration) (time.Duration, bool) {
	stagedAt, ok := stagedat.Read(job.Metadata)
	if !ok || job.AttemptedAt == nil {
		return 0, false
	}
	return max(job.AttemptedAt.Sub(stagedAt), 0) + sinceStart, true
}
