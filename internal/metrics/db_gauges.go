package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeQueryTimeout bounds each database query that a collector runs at scrape time.
// Prometheus gives a whole scrape 10 s by default; these queries count a few small tables and
// take milliseconds, so one that takes seconds meets a stuck or overloaded database, and the rest
// of the scrape must not wait for it.
const scrapeQueryTimeout = 3 * time.Second

// The gauges of this package that count rows (backlogs, jobs by state, requests awaiting
// review) are read from the database at each scrape rather than kept up to date by the process
// that does the work. A backlog gauge exists to reveal work that is not being done, and a gauge
// that the work updates would freeze at its last value, looking healthy, exactly when the work
// stops (a stuck loop, a process that lost its database); and every process of a kind shows the
// same, current figure, however many run.
//
// A query that fails or times out yields an invalid metric in place of its series: the scrape
// still serves every other series (Serve continues on errors and logs the error), and the
// series is absent, not a stale or made-up value, until the query works again.

// queryContext is the context of one scrape-time query. Collect is given none by the scrape, so
// the bound is ours.
func queryContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), scrapeQueryTimeout)
}

// countsByLabel is a gauge with one label, read at each scrape from count, which returns the
// value of each label value.
type countsByLabel struct {
	desc  *prometheus.Desc
	what  string // what count counts, for errors
	count func(ctx context.Context) (map[string]int64, error)
}

func newCountsByLabel(name, help, label, what string, count func(ctx context.Context) (map[string]int64, error)) *countsByLabel {
	return &countsByLabel{
		desc:  prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, []string{label}, nil),
		what:  what,
		count: count,
	}
}

// Describe sends the one description, without querying: DescribeByCollect would query the
// database at registration.
func (c *countsByLabel) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countsByLabel) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := queryContext()
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("error counting %s: %w", c.what, err))
		return
	}
	for value, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), value)
	}
}
