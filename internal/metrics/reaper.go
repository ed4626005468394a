package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reaper key results, the values of rocketrides_reaper_keys_total's result label. They do not
// overlap: their sum is every key reaped.
const (
	ReaperFinished  = "finished"  // a finished key, deleted
	ReaperAbandoned = "abandoned" // an unfinished key, recorded in abandoned_requests, then deleted
)

// Reaper is the series of the reaper's passes, counted as each pass commits.
type Reaper struct {
	// Keys counts the idempotency keys reaped, by result.
	Keys *prometheus.CounterVec
}

// NewReaper returns the reaper's series, registered with reg (nil: unregistered).
func NewReaper(reg prometheus.Registerer) *Reaper {
	m := &Reaper{
		Keys: newCounterByLabel("reaper_keys_total",
			"Idempotency keys the reaper deleted, by result: finished, or abandoned (unfinished, recorded in abandoned_requests first).",
			"result", ReaperFinished, ReaperAbandoned),
	}
	register(reg, m.Keys)
	return m
}
