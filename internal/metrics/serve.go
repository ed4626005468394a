package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server timeouts of the metrics listener. A scrape is one small GET; a scraper that takes
// longer than this is stuck and must not hold a connection open.
const (
	serveReadHeaderTimeout = 5 * time.Second
	serveWriteTimeout      = 30 * time.Second
	serveShutdownTimeout   = 2 * time.Second
)

// Listen opens addr for Serve. It is separate so that a process fails at start, with a clear
// error, when its METRICS_ADDR is taken or malformed, rather than run without metrics.
func Listen(addr string) (net.Listener, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("error listening for metrics on METRICS_ADDR %q: %w", addr, err)
	}
	return listener, nil
}

// Serve answers GET /metrics on listener with what gatherer holds, in Prometheus's text
// format, until ctx ends. Any other path is a 404.
func Serve(ctx context.Context, listener net.Listener, gatherer prometheus.Gatherer, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// A collector that fails (a database query that timed out, say) must not cost the
		// scrape every other series.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	server := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: serveReadHeaderTimeout,
		WriteTimeout:      serveWriteTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	errc := make(chan error, 1)
	go func() { errc <- server.Serve(listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("error serving metrics: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdownTimeout)
	defer cancel()
	if err := server.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("error shutting down metrics server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("error serving metrics: %w", err)
	}
	return nil
}
