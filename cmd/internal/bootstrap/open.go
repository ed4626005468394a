package bootstrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/telemetry"
)

// Open is the start of every process that works on the database, once its configuration is
// loaded and checked: a logger writing to logTo, and a pool that is connected and migrated. The
// caller closes the pool.
func Open(ctx context.Context, cfg *Config, logTo io.Writer) (*slog.Logger, *pgxpool.Pool, error) {
	logger := NewLogger(logTo, cfg)
	pool, err := OpenPool(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	return logger, pool, nil
}

// LogOutput is where a process logs: stdout, except in -once mode, whose stdout carries nothing
// but the one line of results.
func LogOutput(once bool) io.Writer {
	if once {
		return os.Stderr
	}
	return os.Stdout
}

// traceFlushTimeout bounds how long a stopping process waits to export its last spans.
const traceFlushTimeout = 5 * time.Second

// Trace sets up the process's traces from the OTEL_* environment variables (internal/telemetry),
// service naming the process unless OTEL_SERVICE_NAME does. It comes before Open, so that the
// pool traces its statements. The caller defers stop, which exports the spans still buffered.
// Without an OTLP endpoint nothing is set up, and stop does nothing.
func Trace(ctx context.Context, service string) (stop func(), err error) {
	shutdown, err := telemetry.Setup(ctx, service, os.Getenv)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "%s: error exporting the last spans: %v\n", service, err)
		}
	}, nil
}
