package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Completer key results, the values of rocketrides_completer_keys_total's result label.
const (
	CompleterSucceeded = "succeeded" // the request is over: a stored response, 201 or final refusal
	CompleterFailed    = "failed"    // the run stopped on an error; a later pass tries again
)

// Completer is the series of the completer's passes.
type Completer struct {
	// Keys counts the abandoned keys the completer ran, by result. Keys it found taken by
	// someone else, or finished meanwhile, are not counted: it did nothing with them.
	Keys *prometheus.CounterVec
}

// NewCompleter returns the completer's series, registered with reg (nil: unregistered).
func NewCompleter(reg prometheus.Registerer) *Completer {
	m := &Completer{
		Keys: newCounterByLabel("completer_keys_total",
			"Abandoned idempotency keys the completer ran, by result: succeeded or failed.",
			"result", CompleterSucceeded, CompleterFailed),
	}
	register(reg, m.Keys)
	return m
}

// RegisterRequestsAwaitingReview registers with reg the
// rocketrides_requests_awaiting_review{reason} gauge, read from count at each scrape (see
// db_gauges.go for why at scrape time): the requests recorded in abandoned_requests, which a
// person must look at (admin list-abandoned), by the reason they were recorded.
func RegisterRequestsAwaitingReview(reg prometheus.Registerer, count func(ctx context.Context) (map[string]int64, error)) {
	register(reg, newCountsByLabel("requests_awaiting_review",
		"Requests recorded in abandoned_requests for a person to look at (admin list-abandoned), by reason, at the time of the scrape.",
		"reason", "abandoned requests", count))
}
