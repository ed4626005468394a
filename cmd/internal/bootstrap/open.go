package bootstrap

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
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
