package workers

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// failureEventsBuffer is the size of CountFailures's subscription channel. River drops events
// that do not fit (and logs a warning); the reader only increments a counter, so a backlog
// needs a burst of thousands of failures in one go, such as a mail server refusing every
// message of a full batch. Ten thousand pointers cost 80 KB.
const failureEventsBuffer = 10_000

// CountFailures counts in m the receipt job attempts (ride and refund receipts) that River
// reports failed, discarded or cancelled: River alone knows which an attempt was (see the
// package doc). Call it before client.Start, so that no event is missed; counting ends when
// River stops, or when stop is called.
func CountFailures(client *river.Client[pgx.Tx], m *metrics.Worker) (stop func()) {
	events, stop := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: failureEventsBuffer,
		Kinds:    []river.EventKind{river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	go func() {
		for ev := range events {
			results, _, ok := receiptSeries(m, ev.Job.Kind)
			if !ok {
				continue
			}
			switch {
			case ev.Kind == river.EventKindJobCancelled:
				results.WithLabelValues(metrics.ReceiptCancelled).Inc()
			case ev.Job.State == rivertype.JobStateDiscarded:
				results.WithLabelValues(metrics.ReceiptDiscarded).Inc()
			default:
				results.WithLabelValues(metrics.ReceiptFailed).Inc()
			}
		}
	}()
	return stop
}

// receiptSeries are the series in m that count the jobs of kind: results by result (ReceiptSent,
// ...), and latency, nil when the kind's latency is not observed. ok is false for a job kind that
// is no receipt, which is not counted.
//
// A refund receipt is counted in rocketrides_receipts_total with the ride receipts, as
// metrics.Worker has no series of its own for it: the attempts meet the same mail server, so the
// alerts on that series hold for both. Its latency is not observed, since
// rocketrides_receipt_latency_seconds runs from a ride's booking, and the cancel stages a refund
// receipt. Should refund receipts get series of their own, this is the one place to name them.
func receiptSeries(m *metrics.Worker, kind string) (results *prometheus.CounterVec, latency prometheus.Observer, ok bool) {
	switch kind {
	case jobargs.SendRideReceiptKind:
		return m.Receipts, m.ReceiptLatency, true
	case jobargs.SendRefundReceiptKind:
		return m.Receipts, nil, true
	}
	return nil, nil, false
}

// handedOverResult is the result a receipt handed to m counts as: logged for a mailer that
// delivers nothing (no SMTP_URL), whose receipts reach no rider, sent otherwise.
func handedOverResult(m mailer.Mailer) string {
	if !m.Delivers() {
		return metrics.ReceiptLogged
	}
	return metrics.ReceiptSent
}

// riverJobStates are the states rocketrides_river_jobs reports: all of River's but completed,
// whose count is only River's retention of finished work, and the bulk of the table.
var riverJobStates = func() []string {
	var states []string
	for _, state := range rivertype.JobStates() {
		if state != rivertype.JobStateCompleted {
			states = append(states, string(state))
		}
	}
	return states
}()

// RiverJobsByState returns the source of the rocketrides_river_jobs{state} gauge, which the
// worker process registers with metrics.RegisterRiverJobs: River's jobs on pool by state, for
// every kind. Discarded jobs stay until a person acts (`admin list-failed-jobs`).
func RiverJobsByState(pool *pgxpool.Pool) func(ctx context.Context) (map[string]int64, error) {
	return func(ctx context.Context) (map[string]int64, error) {
		return models.RiverJobCountByState(ctx, pool, riverJobStates)
	}
}
