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

// NewPhases returns the executor's series, registered with reg (nil: unregistered), each phase
// label's series at 0 from the start: phaseLabels, the recovery points an atomic phase starts
// from (phases.NewMetrics names them).
func NewPhases(reg prometheus.Registerer, phaseLabels ...string) *Phases {
	m := &Phases{
		PhaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "phase_duration_seconds",
			Help:    "Time an atomic phase took, retries included, by the recovery point it started from.",
			Buckets: latencyBuckets,
		}, []string{"phase"}),
		// Each phase's series exists at 0 from the start, so that a rate() over it, which an
		// alert takes, has a series before the first retry.
		SerializationRetries: newCounterByLabel("serialization_retries_total",
			"Atomic phase transactions run again after a serialization failure or deadlock, by phase.", "phase", phaseLabels...),
	}
	for _, phase := range phaseLabels {
		m.PhaseDuration.WithLabelValues(phase) // the alerts divide by its count
	}
	register(reg, m.PhaseDuration, m.SerializationRetries)
	return m
}
