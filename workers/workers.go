package workers

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
)

// Deps is what the workers need from the process that runs them.
type Deps struct {
	Pool   *pgxpool.Pool
	Mailer mailer.Mailer

	// MailFrom is the From address of receipts. Its domain is also the domain of their
	// Message-IDs. Default MailFromDefault.
	MailFrom string

	Logger *slog.Logger

	// Metrics counts the receipts the workers send. Default: a set that no registry holds.
	Metrics *metrics.Worker
}

// MailFromDefault is the receipts' From address when Deps.MailFrom does not say: a domain
// reserved for examples, as no real one is Rocket Rides'.
const MailFromDefault = "Rocket Rides <receipts@rocketrides.example>"

// Register adds every worker of this package to workers: one for each of
// jobargs.StagedJobNames, so that no job the enqueuer hands River lacks a worker.
func Register(workers *river.Workers, deps Deps) error {
	if deps.Pool == nil || deps.Mailer == nil || deps.Logger == nil {
		return errors.New("workers need a pool, a mailer and a logger")
	}
	deps.MailFrom = cmp.Or(deps.MailFrom, MailFromDefault)
	from, err := mail.ParseAddress(deps.MailFrom)
	if err != nil {
		return fmt.Errorf("error parsing MAIL_FROM %q: %w", deps.MailFrom, err)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.NewWorker(nil)
	}
	sender := receiptSender{
		pool:            deps.Pool,
		mailer:          deps.Mailer,
		mailFrom:        from.String(),
		messageIDDomain: from.Address[strings.LastIndexByte(from.Address, '@')+1:],
		logger:          deps.Logger,
	}
	rideReceipts := &SendRideReceiptWorker{receiptSender: sender.counted(jobargs.SendRideReceiptKind, deps.Metrics)}
	if err := river.AddWorkerSafely(workers, rideReceipts); err != nil {
		return fmt.Errorf("error registering the receipt worker: %w", err)
	}
	refundReceipts := &SendRefundReceiptWorker{receiptSender: sender.counted(jobargs.SendRefundReceiptKind, deps.Metrics)}
	if err := river.AddWorkerSafely(workers, refundReceipts); err != nil {
		return fmt.Errorf("error registering the refund receipt worker: %w", err)
	}
	return nil
}

// counted returns a copy of s that counts its receipts in m, under the series of jobKind's jobs
// (see receiptSeries).
func (s receiptSender) counted(jobKind string, m *metrics.Worker) receiptSender {
	results, latency, _ := receiptSeries(m, jobKind)
	s.handedOver = results.WithLabelValues(handedOverResult(s.mailer))
	s.latency = latency
	return s
}
