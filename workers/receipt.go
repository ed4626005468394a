package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/models"
)

// SendRideReceiptWorker emails the receipt of a charged ride. It records the receipt on the ride
// in the transaction that completes the job, so a job that finds the receipt recorded sends
// nothing. Sending stays at least once, as mail and Postgres share no transaction; the package
// doc says where the window lies.
type SendRideReceiptWorker struct {
	river.WorkerDefaults[jobargs.SendRideReceipt]
	receiptSender
}

// Work sends the ride's receipt unless it was recorded already (see sendReceipt, below).
func (w *SendRideReceiptWorker) Work(ctx context.Context, job *river.Job[jobargs.SendRideReceipt]) error {
	return sendReceipt(ctx, &w.receiptSender, job, jobargs.Receipt(job.Args), rideReceipt)
}

// SendRefundReceiptWorker emails the receipt of the refund a cancel made, and records it on the
// ride, as SendRideReceiptWorker does for the charge.
type SendRefundReceiptWorker struct {
	river.WorkerDefaults[jobargs.SendRefundReceipt]
	receiptSender
}

// Work sends the refund's receipt unless it was recorded already (see sendReceipt).
func (w *SendRefundReceiptWorker) Work(ctx context.Context, job *river.Job[jobargs.SendRefundReceipt]) error {
	return sendReceipt(ctx, &w.receiptSender, job, jobargs.Receipt(job.Args), refundReceipt)
}

// RecordTimeout bounds recording a receipt that has been sent. That step ignores the job's
// cancellation (see sendReceipt), so it needs a bound of its own; a healthy database takes
// milliseconds. It outlasts a failover of the tuned formation (7 to 9 s on a loaded machine)
// twice: a receipt caught by one is recorded on the new primary, not mailed again.
const RecordTimeout = 20 * time.Second

// recordAttemptTimeout bounds one try at recording. A primary that froze, or whose machine was
// lost, leaves the connection to it waiting for an answer that never comes. The next try goes
// out on a new connection, which reaches the new primary once there is one.
const recordAttemptTimeout = 5 * time.Second

// receiptSender is what a receipt worker needs: the process's pool and mailer, and the metrics
// series of its kind.
type receiptSender struct {
	pool            *pgxpool.Pool
	mailer          mailer.Mailer
	mailFrom        string
	messageIDDomain string
	logger          *slog.Logger

	// handedOver counts receipts handed to the mailer and recorded: rocketrides_receipts_total
	// with result sent, or logged for a mailer that only logs (see metrics.go).
	handedOver prometheus.Counter

	// latency observes how long each receipt counted sent took from the booking to the mail
	// server (see receiptLatency). It is nil for a kind whose latency is not observed.
	latency prometheus.Observer
}

// sendReceipt sends job's receipt, unless it was recorded already, and records it in the
// transaction that completes the job. An SMTP failure is returned, so River retries with backoff.
// A job that can never succeed (its ride is gone, or has nothing to receipt) is cancelled.
func sendReceipt[T river.JobArgs](ctx context.Context, s *receiptSender, job *river.Job[T], args jobargs.Receipt, kind *receiptKind) error {
	started := time.Now()

	// The job holds one connection from its first query to the commit that records the receipt,
	// so recording never waits for a connection that other jobs took meanwhile.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring a database connection: %w", err)
	}
	defer conn.Release()

	ride, err := models.RideGetByIDForUser(ctx, conn, args.RideID, args.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("no ride %d of user %d to send a %s for: %w", args.RideID, args.UserID, kind.name, err))
	}
	if err != nil {
		return err
	}
	if kind.stripeID(ride) == nil {
		return river.JobCancel(fmt.Errorf("ride %d has nothing to send a %s for", ride.ID, kind.name))
	}
	if sentAt := kind.sentAt(ride); sentAt != nil {
		s.logger.InfoContext(ctx, "Worker: "+kind.name+" already recorded, not sending it again",
			slog.Int64("ride_id", ride.ID), slog.Time("sent_at", *sentAt), slog.Int64("job_id", job.ID))
		return nil
	}

	user, err := models.UserGetByID(ctx, conn, args.UserID)
	if err != nil {
		return err
	}
	if _, err := mail.ParseAddress(user.Email); err != nil {
		return river.JobCancel(fmt.Errorf("user %d has an email address no mail server takes: %w", user.ID, err))
	}

	msg := kind.message(ride, user, args, s.mailFrom, s.messageIDDomain)
	if err := s.mailer.Send(ctx, msg); err != nil {
		return fmt.Errorf("error mailing %s of ride %d: %w", kind.name, ride.ID, err)
	}
	latency, latencyKnown := receiptLatency(job.JobRow, time.Since(started))

	// The message is out. From here on the job ignores its cancellation (a shutdown): giving up
	// now would leave the receipt unrecorded, and the retry would mail it again.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RecordTimeout)
	defer cancel()
	attemptCtx, cancelAttempt := context.WithTimeout(recordCtx, recordAttemptTimeout)
	raced, err := recordReceipt(attemptCtx, s, kind, conn, job, ride, msg.MessageID)
	cancelAttempt()
	for attempt := 1; err != nil && models.IsUnavailable(err); attempt++ {
		// The database went away (a restart, a failover) while the message was out. Failing the
		// job would mail the receipt again on its retry, so keep trying on a fresh connection
		// for as long as RecordTimeout allows.
		s.logger.WarnContext(ctx, "Worker: "+kind.name+" mailed but not recorded yet; retrying on a new connection",
			slog.Int64("ride_id", ride.ID), slog.Int("attempt", attempt), slog.String("error", err.Error()))
		select {
		case <-recordCtx.Done():
			return fmt.Errorf("error recording %s of ride %d: %w", kind.name, ride.ID, err)
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		}
		raced, err = recordOnNewConnection(recordCtx, s, kind, job, ride, msg.MessageID)
	}
	if err != nil {
		return err
	}
	s.handedOver.Inc()
	if latencyKnown && s.latency != nil && s.mailer.Delivers() {
		s.latency.Observe(latency.Seconds())
	}
	level, logMsg := slog.LevelInfo, "Worker: sent "+kind.name
	switch {
	case raced:
		level, logMsg = slog.LevelWarn, "Worker: "+kind.name+" was recorded by another job meanwhile; the rider may have it twice"
	case !s.mailer.Delivers():
		// A receipt that went only to the log (no SMTP_URL) reached no rider, and an operator
		// reading "sent" would believe it had.
		logMsg = "Worker: logged " + kind.name + ", not sent (SMTP_URL unset)"
	}
	s.logger.Log(ctx, level, logMsg,
		slog.Int64("ride_id", ride.ID), slog.Int64("user_id", user.ID), slog.String("message_id", msg.MessageID),
		slog.Int64("job_id", job.ID), slog.Int("attempt", job.Attempt))
	return nil
}

// recordReceipt records the receipt and completes the job in one transaction on conn, so a
// receipt is recorded exactly when its job is done. raced reports that another job recorded a
// receipt for the ride first; the job is completed all the same.
func recordReceipt[T river.JobArgs](ctx context.Context, s *receiptSender, kind *receiptKind, conn txBeginner, job *river.Job[T], ride *models.Ride, messageID string) (raced bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("error beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit

	if _, err := kind.record(ctx, tx, ride.UserID, ride.ID, messageID); errors.Is(err, models.ErrNotFound) {
		raced = true
	} else if err != nil {
		return false, err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return false, fmt.Errorf("error completing job %d: %w", job.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("error committing %s of ride %d: %w", kind.name, ride.ID, err)
	}
	return raced, nil
}

// txBeginner is a connection that recordReceipt can begin its transaction on: the job's own, from
// the pool, or one dialled for a retry.
type txBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// recordOnNewConnection is recordReceipt, within recordAttemptTimeout, on a connection dialled for
// it. An idle connection of the pool may lead to the primary that the last try lost, and hang as
// that try did.
func recordOnNewConnection[T river.JobArgs](ctx context.Context, s *receiptSender, kind *receiptKind, job *river.Job[T], ride *models.Ride, messageID string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, recordAttemptTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("error connecting to the database: %w", err)
	}
	defer conn.Close(ctx)
	// A try whose commit went through but whose answer was lost has recorded the receipt and
	// completed the job already. Recording it again would find it recorded, as if by another job.
	state, err := models.RiverJobState(ctx, conn, job.ID)
	if err != nil {
		return false, err
	}
	if state == string(rivertype.JobStateCompleted) {
		s.logger.InfoContext(ctx, "Worker: "+kind.name+" was recorded by an earlier try, whose commit was not acknowledged",
			slog.Int64("ride_id", ride.ID), slog.Int64("job_id", job.ID))
		return false, nil
	}
	return recordReceipt(ctx, s, kind, conn, job, ride, messageID)
}

// receiptKind is what sets a ride's two receipts apart, the charge's (rideReceipt) and the
// refund's (refundReceipt): where each is recorded, and its words. sendReceipt does the rest the
// same for both.
type receiptKind struct {
	// name is the receipt's name in log lines and errors, and in its Message-ID.
	name string

	// stripeID is the charge or refund that the receipt is for, nil if the ride has none: then
	// there is nothing to receipt, and no retry can change that.
	stripeID func(ride *models.Ride) *string

	// sentAt is when the receipt was recorded as sent, nil if it was not.
	sentAt func(ride *models.Ride) *time.Time

	// record records the receipt as sent with messageID. Only the first is recorded: after that,
	// it returns models.ErrNotFound.
	record func(ctx context.Context, db models.DBTX, userID, rideID int64, messageID string) (*models.RideReceipt, error)

	// The receipt's words (see message): its subject's, its opening line, what was done with
	// the amount and under which id, and a note before the closing question.
	subject, opening, amountDone, idLabel, note, question string
}

// rideReceipt is the receipt of a charged ride, recorded in rides.receipt_sent_at.
var rideReceipt = &receiptKind{
	name:       "receipt",
	stripeID:   func(ride *models.Ride) *string { return ride.StripeChargeID },
	sentAt:     func(ride *models.Ride) *time.Time { return ride.ReceiptSentAt },
	record:     models.RideReceiptRecord,
	subject:    "receipt",
	opening:    "Thanks for flying with Rocket Rides!",
	amountDone: "Charged",
	idLabel:    "Charge ID",
	question:   "Questions about this charge? Reply to this email and quote the charge ID.",
}

// refundReceipt is the receipt of the refund a cancel made, recorded in
// rides.refund_receipt_sent_at.
var refundReceipt = &receiptKind{
	name:       "refund receipt",
	stripeID:   func(ride *models.Ride) *string { return ride.StripeRefundID },
	sentAt:     func(ride *models.Ride) *time.Time { return ride.RefundReceiptSentAt },
	record:     models.RideRefundReceiptRecord,
	subject:    "refund",
	opening:    "Your ride was cancelled, and its charge refunded.",
	amountDone: "Refunded",
	idLabel:    "Refund ID",
	note:       "A refund can take 5 to 10 business days to show on your statement.\n",
	question:   "Questions about this refund? Reply to this email and quote the refund ID.",
}

// receiptLatency is how long job's receipt took from its booking to the mail server, given that
// the server accepted it sinceStart after the job began; docs/receipts.md says why clock skew does
// not enter it. It returns false for a job that does not say when it was staged: one inserted by
// something other than the enqueuer.
func receiptLatency(job *rivertype.JobRow, sinceStart time.Duration) (time.Duration, bool) {
	stagedAt, ok := jobargs.StagedAt(job.Metadata)
	if !ok || job.AttemptedAt == nil {
		return 0, false
	}
	return max(job.AttemptedAt.Sub(stagedAt), 0) + sinceStart, true
}

// message renders ride's receipt to user: which ride, the amount and what was done with it,
// and the charge or refund to quote to support. sendReceipt has checked that there is one.
func (k *receiptKind) message(ride *models.Ride, user *models.User, args jobargs.Receipt, from, messageIDDomain string) *mailer.Message {
	amount := formatAmount(args.Amount, args.Currency)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", k.opening)
	fmt.Fprintf(&b, "Ride       #%d, %s\n", ride.ID, ride.CreatedAt.UTC().Format("2 January 2006, 15:04 MST"))
	fmt.Fprintf(&b, "From       %.5f, %.5f\n", ride.OriginLat, ride.OriginLon)
	fmt.Fprintf(&b, "To         %.5f, %.5f\n", ride.TargetLat, ride.TargetLon)
	fmt.Fprintf(&b, "%-10s %s to your card on file\n", k.amountDone, amount)
	fmt.Fprintf(&b, "%-10s %s\n\n", k.idLabel, *k.stripeID(ride))
	fmt.Fprintf(&b, "%s%s\n\nRocket Rides\n", k.note, k.question)
	return &mailer.Message{
		From: from, To: user.Email, Body: b.String(), MessageID: k.messageID(ride, messageIDDomain),
		Subject: fmt.Sprintf("Your Rocket Rides %s: %s for ride #%d", k.subject, amount, ride.ID),
	}
}

// messageID is the same for every attempt at one ride's receipt, so that copies sent by retries
// can be recognised downstream, and another for each kind. It includes the ride's creation time
// as well as its id because ids repeat across databases (a reset, a second region), and a mail
// system that deduplicates would then drop a new ride's receipt as a copy of an old one.
func (k *receiptKind) messageID(ride *models.Ride, domain string) string {
	return fmt.Sprintf("<ride-%d.%d.%s@%s>", ride.ID, ride.CreatedAt.UnixMicro(), strings.ReplaceAll(k.name, " ", "-"), domain)
}

// ReceiptMessageID is the Message-ID of ride's receipt (see messageID). Exported for
// internal/seed, which records receipts the way the worker does.
func ReceiptMessageID(ride *models.Ride, domain string) string {
	return rideReceipt.messageID(ride, domain)
}

// currencySymbols are the currencies a receipt writes with a symbol; others get their code.
var currencySymbols = map[string]string{"usd": "$", "eur": "€", "gbp": "£", "jpy": "¥"}

// zeroDecimalCurrencies are those Stripe counts in whole units rather than hundredths
// (https://docs.stripe.com/currencies#zero-decimal).
var zeroDecimalCurrencies = map[string]bool{
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true,
	"mga": true, "pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true,
	"xof": true, "xpf": true,
}

// formatAmount writes amount, in the currency's smallest unit as Stripe counts it, the way a
// person reads it: 2000 usd is "$20.00", 123456 eur "€1,234.56", 500 jpy "¥500", 2000 chf
// "20.00 CHF".
func formatAmount(amount int64, currency string) string {
	currency = strings.ToLower(currency)
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}

	whole, cents := amount, ""
	if !zeroDecimalCurrencies[currency] {
		whole, cents = amount/100, fmt.Sprintf(".%02d", amount%100)
	}
	number := groupThousands(strconv.FormatInt(whole, 10)) + cents
	if symbol, ok := currencySymbols[currency]; ok {
		return sign + symbol + number
	}
	return sign + number + " " + strings.ToUpper(currency)
}

// groupThousands puts commas between groups of three digits: "1234567" is "1,234,567".
func groupThousands(digits string) string {
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
