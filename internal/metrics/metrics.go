// Package metrics is what every Rocket Rides process tells Prometheus. Each process builds a
// registry with NewRegistry, registers the series of the work it does (API, Phases, Stripe,
// Enqueuer, ...) and, when METRICS_ADDR is set, serves them at GET /metrics on that address
// (Serve): never on the API's public port, since the figures are the operator's business.
//
// Every series is named rocketrides_*. A component given no metrics records into a set that no
// registry holds, so that tests and tools need not build one.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// namespace prefixes every series: rocketrides_http_requests_total and so on.
const namespace = "rocketrides"

// NewRegistry returns a registry that already holds the Go runtime's and the process's own
// series (go_*, process_*), which every process exposes.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// register registers cs with reg; a nil reg registers nothing, for components built without
// metrics.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) {
	if reg == nil {
		return
	}
	reg.MustRegister(cs...)
}

// newCounterByLabel returns rocketrides_<name>, counted by one label whose values are known, and
// puts each of values at 0 from the start: a rate() over a series that appears with its first
// event misses that event.
func newCounterByLabel(name, help, label string, values ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, []string{label})
	for _, v := range values {
		c.WithLabelValues(v)
	}
	return c
}

// latencyBuckets are the buckets of every duration histogram here, in seconds: from a
// millisecond, an atomic phase on an idle database, to 30 s, near the longest a ride request
// may run (45 s).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
