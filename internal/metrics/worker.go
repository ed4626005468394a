package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Receipt results, the values of rocketrides_receipts_total's result label. Each attempt of a
// receipt job counts once.
const (
	ReceiptSent      = "sent"      // the mail server accepted it, and it is recorded
	ReceiptLogged    = "logged"    // written to the log instead (SMTP_URL unset): no rider got it
	ReceiptFailed    = "failed"    // the attempt failed; River will try again
	ReceiptDiscarded = "discarded" // the last attempt failed; the job waits for a person
	ReceiptCancelled = "cancelled" // given up as pointless: no such ride, never charged, bad address
)

var receiptResults = []string{ReceiptSent, ReceiptLogged, ReceiptFailed, ReceiptDiscarded, ReceiptCancelled}

// Worker is the series of the worker process.
type Worker struct {
	// Receipts counts receipt job attempts by result (ReceiptSent, ...). A job that finds its
	// receipt recorded already sends nothing and is not counted.
	Receipts *prometheus.CounterVec

	// ReceiptLatency is the time from a ride's booking to the mail server's acceptance of its
	// receipt, in seconds: what a rider waits for the receipt after the 201. It is observed once
	// per receipt counted sent.
	ReceiptLatency prometheus.Histogram
}

// receiptLatencyBuckets are rocketrides_receipt_latency_seconds's buckets: fine below a second,
// where a receipt that rides the notifications lands (tens of milliseconds) and one that waited
// for a poll (up to a second) can be told apart, then coarse up to the four hours that River's
// retries of a failing mail server span (jobargs.SendRideReceiptMaxAttempts).
var receiptLatencyBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 14400}

// NewWorker returns the worker's series, registered with reg (nil: unregistered).
func NewWorker(reg prometheus.Registerer) *Worker {
	m := &Worker{
		Receipts: newCounterByLabel("receipts_total",
			"Receipt job attempts (ride and refund receipts), by result: sent, logged (SMTP_URL unset), failed (to be retried), discarded (for good), cancelled.",
			"result", receiptResults...),
		ReceiptLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "receipt_latency_seconds",
			Help:    "Time from a ride's booking (its receipt staged, just before the 201) to the mail server accepting the receipt, retries included; receipts sent only.",
			Buckets: receiptLatencyBuckets,
		}),
	}
	register(reg, m.Receipts, m.ReceiptLatency)
	return m
}

// RegisterRiverJobs registers with reg the rocketrides_river_jobs{state} gauge, read from count
// at each scrape (see db_gauges.go for why at scrape time). count returns the number of River's
// jobs in each state it reports.
func RegisterRiverJobs(reg prometheus.Registerer, count func(ctx context.Context) (map[string]int64, error)) {
	register(reg, newCountsByLabel("river_jobs",
		"River jobs by state, at the time of the scrape. Completed jobs are left out: their number is River's retention, not work.",
		"state", "River jobs", count))
}
