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
}

// NewWorker returns the worker's series, registered with reg (nil: unregistered).
func NewWorker(reg prometheus.Registerer) *Worker {
	m := &Worker{
		Receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "receipts_total",
			Help: "Ride receipt job attempts, by result: sent, logged (SMTP_URL unset), failed (to be retried), discarded (for good), cancelled.",
		}, []string{"result"}),
	}
	for _, result := range receiptResults {
		m.Receipts.WithLabelValues(result)
	}
	register(reg, m.Receipts)
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
