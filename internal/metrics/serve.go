package metrics

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler answers GET /metrics with what gatherer holds, in Prometheus's text format; any other
// path is a 404. bootstrap.ServeMetrics serves it on METRICS_ADDR.
func Handler(gatherer prometheus.Gatherer, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// A collector that fails (a database query that timed out, say) must not cost the
		// scrape every other series.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return mux
}
