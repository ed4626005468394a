package metrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector reads a pgxpool's Stat at each scrape: the rocketrides_db_pool_* series. A
// pool that is always at its maximum of acquired connections, with empty acquires climbing,
// is a pool too small for its load (see bootstrap.PoolMaxConnsDefault).
type poolCollector struct {
	pool *pgxpool.Pool
}

// RegisterPool registers the rocketrides_db_pool_* series of pool with reg.
func RegisterPool(reg prometheus.Registerer, pool *pgxpool.Pool) {
	register(reg, &poolCollector{pool: pool})
}

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "db_pool", name), help, nil, nil)
}

var (
	poolAcquiredConns     = poolDesc("acquired_conns", "Connections in use by the process.")
	poolIdleConns         = poolDesc("idle_conns", "Connections open and idle.")
	poolConstructingConns = poolDesc("constructing_conns", "Connections being opened.")
	poolTotalConns        = poolDesc("total_conns", "Connections open, in use or idle, or being opened.")
	poolMaxConns          = poolDesc("max_conns", "The most connections the pool opens.")
	poolAcquires          = poolDesc("acquires_total", "Connections handed out.")
	poolAcquireSeconds    = poolDesc("acquire_duration_seconds_total", "Time spent handing connections out, waits included.")
	poolEmptyAcquires     = poolDesc("empty_acquires_total", "Acquires that had to wait because no connection was idle.")
	poolEmptyWaitSeconds  = poolDesc("empty_acquire_wait_seconds_total", "Time spent waiting in those acquires.")
	poolCanceledAcquires  = poolDesc("canceled_acquires_total", "Acquires given up on because their context ended.")
	poolNewConns          = poolDesc("new_conns_total", "Connections opened.")
	poolLifetimeDestroys  = poolDesc("max_lifetime_destroys_total", "Connections closed for reaching their maximum lifetime.")
	poolIdleDestroys      = poolDesc("max_idle_destroys_total", "Connections closed for idling too long.")
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v int32) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(poolAcquiredConns, s.AcquiredConns())
	gauge(poolIdleConns, s.IdleConns())
	gauge(poolConstructingConns, s.ConstructingConns())
	gauge(poolTotalConns, s.TotalConns())
	gauge(poolMaxConns, s.MaxConns())
	counter(poolAcquires, float64(s.AcquireCount()))
	counter(poolAcquireSeconds, s.AcquireDuration().Seconds())
	counter(poolEmptyAcquires, float64(s.EmptyAcquireCount()))
	counter(poolEmptyWaitSeconds, s.EmptyAcquireWaitTime().Seconds())
	counter(poolCanceledAcquires, float64(s.CanceledAcquireCount()))
	counter(poolNewConns, float64(s.NewConnsCount()))
	counter(poolLifetimeDestroys, float64(s.MaxLifetimeDestroyCount()))
	counter(poolIdleDestroys, float64(s.MaxIdleDestroyCount()))
}
