package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// RecordTimeout bounds recording a receipt that has been sent. That step ignores the job's
// cancellation (see receiptSender.send), so it needs a bound of its own; a healthy database
// takes milliseconds. It outlasts a failover of the tuned formation (7 to 9 s on a loaded
// machine) twice: a receipt caught by one is recorded on the new primary, not mailed again.
const RecordTimeout = 20 * time.Second

// recordAttemptTimeout bounds one try at recording. A primary that froze, or whose machine was
// lost, leaves the connection to it waiting for an answer that never comes; the next try goes
// out on a new connection, which reaches the new primary once there is one.
const recordAttemptTimeout = 5 * time.Second

// receiptKind is what sets one kind of receipt apart (a ride's, a refund's): which ride a job's
// receipt is about, what it says, and where it is recorded. receiptSender does the rest, the
// same for every kind.
type receiptKind[T river.JobArgs] struct {
	// name is the receipt's name in log lines and errors: "receipt", "refund receipt".
	name string

	// ride returns the ride that args' receipt is about, and the receipt recorded for it
	// already (nil if none). A job that can never succeed gets an error wrapped in
	// river.JobCancel.
	ride func(ctx context.Context, db models.DBTX, args T) (ride *models.Ride, recorded *models.RideReceipt, err error)

	// message renders the receipt of ride to user.
	message func(ride *models.Ride, user *models.User, args T, from, messageIDDomain string) *mailer.Message

	// record records the receipt of a ride as sent with messageID: only the first,
	// models.ErrNotFound after that.
	record func(ctx context.Context, db models.DBTX, userID, rideID int64, messageID string) (*models.RideReceipt, error)
}

// receiptSender emails the receipts of one kind and records each on its ride, in the
// transaction that completes the job, so that a job finding its receipt recorded sends nothing.
// Sending stays at least once, as mail and Postgres share no transaction; the package doc says
// where the window lies and how send keeps it short.
type receiptSender[T river.JobArgs] struct {
	receiptDeps
	kind receiptKind[T]

	// handedOver counts receipts handed to the mailer and recorded: rocketrides_receipts_total
	// with result sent, or logged for a mailer that only logs (see metrics.go).
	handedOver prometheus.Counter

	// latency observes, for each receipt counted sent, how long it took from the booking to
	// the mail server (see receiptLatency). nil for a kind whose latency is not observed.
	latency prometheus.Observer
}

// receiptDeps are what every receiptSender is given, whatever its kind.
type receiptDeps struct {
	pool            *pgxpool.Pool
	mailer          mailer.Mailer
	mailFrom        string
	messageIDDomain string
	logger          *slog.Logger
	metrics         *metrics.Worker
}

// newReceiptSender returns the sender of receipts of kind, counting them in deps.metrics under
// the series of kind's jobs (see receiptSeries).
func newReceiptSender[T river.JobArgs](deps receiptDeps, kind receiptKind[T]) receiptSender[T] {
	var args T
	results, latency, _ := receiptSeries(deps.metrics, args.Kind())
	return receiptSender[T]{
		receiptDeps: deps,
		kind:        kind,
		handedOver:  results.WithLabelValues(handedOverResult(deps.mailer)),
		latency:     latency,
	}
}

// send sends job's receipt unless it was recorded already. An SMTP failure is returned, so River
// retries with backoff; a job that cannot ever succeed (its ride is gone, or has nothing to
// receipt) is cancelled instead.
func (s *receiptSender[T]) send(ctx context.Context, job *river.Job[T]) error {
	started := time.Now()

	// Held from the first query to the commit that records the receipt, so that recording never
	// waits for a connection that other jobs took meanwhile (see the package doc).
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring a database connection: %w", err)
	}
	defer conn.Release()

	ride, recorded, err := s.kind.ride(ctx, conn, job.Args)
	if err != nil {
		return err
	}
	if recorded != nil {
		attrs := []any{slog.Int64("ride_id", ride.ID)}
		if recorded.MessageID != "" {
			attrs = append(attrs, slog.String("message_id", recorded.MessageID))
		}
		attrs = append(attrs, slog.Time("sent_at", recorded.SentAt), slog.Int64("job_id", job.ID))
		s.logger.InfoContext(ctx, "Worker: "+s.kind.name+" already recorded, not sending it again", attrs...)
		return nil
	}

	// The ride was found as the job's user's, so ride.UserID is the job's.
	user, err := models.UserGetByID(ctx, conn, ride.UserID)
	if err != nil {
		return err
	}
	if _, err := mail.ParseAddress(user.Email); err != nil {
		return river.JobCancel(fmt.Errorf("user %d has an email address no mail server takes: %w", user.ID, err))
	}

	msg := s.kind.message(ride, user, job.Args, s.mailFrom, s.messageIDDomain)
	if err := s.mailer.Send(ctx, msg); err != nil {
		return fmt.Errorf("error mailing %s of ride %d: %w", s.kind.name, ride.ID, err)
	}
	latency, latencyKnown := receiptLatency(job.JobRow, time.Since(started))

	// The message is out. From here on the job's cancellation (a shutdown) is ignored: giving
	// up now would only leave the receipt unrecorded and mail it again on the retry.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RecordTimeout)
	defer cancel()
	attemptCtx, cancelAttempt := context.WithTimeout(recordCtx, recordAttemptTimeout)
	raced, err := s.record(attemptCtx, conn, job, ride.UserID, ride.ID, msg.MessageID)
	cancelAttempt()
	for attempt := 1; err != nil && models.IsUnavailable(err); attempt++ {
		// The database went away (a restart, a failover) while the message was out: keep trying
		// on a fresh connection, for as long as RecordTimeout allows, rather than fail the job
		// and mail the receipt again on its retry.
		s.logger.WarnContext(ctx, "Worker: "+s.kind.name+" mailed but not recorded yet; retrying on a new connection",
			slog.Int64("ride_id", ride.ID), slog.Int("attempt", attempt), slog.String("error", err.Error()))
		select {
		case <-recordCtx.Done():
			return fmt.Errorf("error recording %s of ride %d: %w", s.kind.name, ride.ID, err)
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		}
		raced, err = s.recordOnNewConnection(recordCtx, job, ride.UserID, ride.ID, msg.MessageID)
	}
	if err != nil {
		return err
	}
	s.handedOver.Inc()
	if latencyKnown && s.latency != nil && s.mailer.Delivers() {
		s.latency.Observe(latency.Seconds())
	}
	if raced {
		s.logger.WarnContext(ctx, "Worker: "+s.kind.name+" was recorded by another job meanwhile; the rider may have it twice",
			slog.Int64("ride_id", ride.ID), slog.String("message_id", msg.MessageID), slog.Int64("job_id", job.ID))
		return nil
	}
	// A receipt that went only to the log (no SMTP_URL) reached no rider, and an operator
	// reading "sent" would believe it had.
	logMsg := "Worker: sent " + s.kind.name
	if !s.mailer.Delivers() {
		logMsg = "Worker: logged " + s.kind.name + ", not sent (SMTP_URL unset)"
	}
	s.logger.InfoContext(ctx, logMsg,
		slog.Int64("ride_id", ride.ID), slog.Int64("user_id", user.ID), slog.String("message_id", msg.MessageID),
		slog.Int64("job_id", job.ID), slog.Int("attempt", job.Attempt))
	return nil
}

// txBeginner is a connection that record can begin its transaction on: the job's own, from the
// pool, or one dialled for a retry.
type txBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// recordOnNewConnection is record, within recordAttemptTimeout, on a connection of its own,
// dialled for it: an idle one of the pool may lead to the primary that the last try lost, and
// hang as that try did.
func (s *receiptSender[T]) recordOnNewConnection(ctx context.Context, job *river.Job[T], userID, rideID int64, messageID string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, recordAttemptTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("error connecting to the database: %w", err)
	}
	defer conn.Close(ctx)
	// A try whose commit went through but whose answer was lost has recorded the receipt and
	// completed the job already; recording it again would find it recorded, as if by another job.
	state, err := models.RiverJobState(ctx, conn, job.ID)
	if err != nil {
		return false, err
	}
	if state == string(rivertype.JobStateCompleted) {
		s.logger.InfoContext(ctx, "Worker: "+s.kind.name+" was recorded by an earlier try, whose commit was not acknowledged",
			slog.Int64("ride_id", rideID), slog.Int64("job_id", job.ID))
		return false, nil
	}
	return s.record(ctx, conn, job, userID, rideID, messageID)
}

// record records the receipt and completes the job in one transaction on conn, so that a
// receipt is recorded exactly when its job is done. raced reports that another job had recorded
// a receipt for the ride first; the job is completed all the same.
func (s *receiptSender[T]) record(ctx context.Context, conn txBeginner, job *river.Job[T], userID, rideID int64, messageID string) (raced bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("error beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit

	if _, err := s.kind.record(ctx, tx, userID, rideID, messageID); errors.Is(err, models.ErrNotFound) {
		raced = true
	} else if err != nil {
		return false, err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return false, fmt.Errorf("error completing job %d: %w", job.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("error committing %s of ride %d: %w", s.kind.name, rideID, err)
	}
	return raced, nil
}

// receiptLatency is how long job's receipt took from its booking to the mail server, given that
// the server accepted it sinceStart after the job began; the package doc says why it is free of
// clock skew. false for a job that does not say when it was staged: one inserted by something
// other than the enqueuer.
func receiptLatency(job *rivertype.JobRow, sinceStart time.Duration) (time.Duration, bool) {
	stagedAt, ok := jobargs.StagedAt(job.Metadata)
	if !ok || job.AttemptedAt == nil {
		return 0, false
	}
	return max(job.AttemptedAt.Sub(stagedAt), 0) + sinceStart, true
}
