package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Enqueuer is the series of the enqueuer's passes, counted as each batch commits.
type Enqueuer struct {
	// EnqueuedJobs counts staged jobs handed to River.
	EnqueuedJobs prometheus.Counter

	// SetAsideJobs counts staged jobs that River would never take, set aside as failed in
	// staged_jobs for a person (see rocketrides_staged_jobs_failed).
	SetAsideJobs prometheus.Counter
}

// NewEnqueuer returns the enqueuer's series, registered with reg (nil: unregistered).
func NewEnqueuer(reg prometheus.Registerer) *Enqueuer {
	m := &Enqueuer{
		EnqueuedJobs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "enqueued_jobs_total",
			Help: "Staged jobs handed to River.",
		}),
		SetAsideJobs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "staged_jobs_set_aside_total",
			Help: "Staged jobs River would not take, set aside as failed in staged_jobs.",
		}),
	}
	register(reg, m.EnqueuedJobs, m.SetAsideJobs)
	return m
}

var (
	stagedJobsDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "staged_jobs"),
		"Staged jobs waiting to be enqueued into River (not set aside), at the time of the scrape.", nil, nil)
	stagedJobsFailedDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "staged_jobs_failed"),
		"Staged jobs set aside as failed, waiting for a person (admin list-failed-jobs).", nil, nil)
	stagedJobOldestAgeDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "staged_job_oldest_age_seconds"),
		"Age of the oldest staged job waiting to be enqueued; 0 when none waits.", nil, nil)
)

// RegisterStagedJobs registers with reg the rocketrides_staged_jobs, _staged_jobs_failed and
// _staged_job_oldest_age_seconds gauges, which read returns at each scrape (see db_gauges.go for
// why at scrape time): from staged_jobs, on the process's pool.
func RegisterStagedJobs(reg prometheus.Registerer, read func(ctx context.Context) (*StagedJobs, error)) {
	register(reg, &stagedJobsCollector{read: read})
}

// StagedJobs is what RegisterStagedJobs's gauges show of staged_jobs.
type StagedJobs struct {
	Pending          int64         // waiting to be enqueued
	Failed           int64         // set aside for a person
	OldestPendingAge time.Duration // of the oldest waiting one; 0 when none waits
}

type stagedJobsCollector struct {
	read func(ctx context.Context) (*StagedJobs, error)
}

func (c *stagedJobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stagedJobsDesc
	ch <- stagedJobsFailedDesc
	ch <- stagedJobOldestAgeDesc
}

func (c *stagedJobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := queryContext()
	defer cancel()
	s, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(stagedJobsDesc, fmt.Errorf("error reading staged jobs: %w", err))
		return
	}
	ch <- prometheus.MustNewConstMetric(stagedJobsDesc, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(stagedJobsFailedDesc, prometheus.GaugeValue, float64(s.Failed))
	ch <- prometheus.MustNewConstMetric(stagedJobOldestAgeDesc, prometheus.GaugeValue, s.OldestPendingAge.Seconds())
}
