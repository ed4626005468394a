package metrics

import "github.com/prometheus/client_golang/prometheus"

// Phases is the series of the phase executor, in every process that drives ride requests (the
// API and the completer). Their phase label is the recovery point an atomic phase started from:
// "started" (key, ride and audit record, up to the charge), "ride_created" (after the charge:
// its id, the staged receipt, the response) and, for a request resumed there, "charge_created".
type Phases struct {
	// PhaseDuration is how long atomic phases took, serialization retries included.
	PhaseDuration *prometheus.HistogramVec

	// SerializationRetries counts atomic phase transactions that Postgres aborted with a
	// serialization failure or a deadlock and that ran again. A steady rate means concurrent
	// requests touch the same index pages (see the style guide on random ids).
	SerializationRetries *prometheus.CounterVec
}

// NewPhases returns the executor's series, registered with reg (nil: unregistered).
func NewPhases(reg prometheus.Registerer) *Phases {
	m := &Phases{
		PhaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "phase_duration_seconds",
			Help:    "Time an atomic phase took, retries included, by the recovery point it started from.",
			Buckets: latencyBuckets,
		}, []string{"phase"}),
		SerializationRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "serialization_retries_total",
			Help: "Atomic phase transactions run again after a serialization failure or deadlock, by phase.",
		}, []string{"phase"}),
	}
	register(reg, m.PhaseDuration, m.SerializationRetries)
	return m
}
