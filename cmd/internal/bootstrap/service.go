package bootstrap

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Service is a background process's work, in the shape of River's maintenance services:
// RunOnce does one bounded pass, Start runs passes until Stop.
type Service[R any] interface {
	Start(ctx context.Context) error
	Stop()
	RunOnce(ctx context.Context) (R, error)
}

// ParseOnceFlag parses a background command's only flag, -once. A bad flag is a cli.UsageError.
func ParseOnceFlag(name string, args []string, usage string) (bool, error) {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	once := flags.Bool("once", false, usage)
	if err := flags.Parse(args); err != nil {
		return false, &cli.UsageError{Err: err}
	}
	return *once, nil
}

// Process is what a background command has opened before it builds its service.
type Process struct {
	// Once is the -once flag: one pass, its result printed, then exit.
	Once bool

	Config *Config
	Logger *slog.Logger

	// Pool is connected and migrated. The command closes it.
	Pool *pgxpool.Pool

	// Registry holds the pool's series; the command adds its own before it starts work.
	Registry *prometheus.Registry

	stopTracing func()
}

// Close closes the pool and exports the spans still buffered.
func (p *Process) Close() {
	p.Pool.Close()
	p.stopTracing()
}

// OpenProcess opens what a background command needs before it builds its service: it parses
// -once (onceUsage says what it does), loads the configuration, sets up traces (Trace), and
// opens the logger, the pool and the metrics registry. Under -once the logger writes to stderr:
// stdout carries the result. The command calls Close.
func OpenProcess(ctx context.Context, name string, args []string, onceUsage string) (*Process, error) {
	once, err := ParseOnceFlag(name, args, onceUsage)
	if err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	stopTracing, err := Trace(ctx, name)
	if err != nil {
		return nil, err
	}
	logger, pool, err := Open(ctx, cfg, LogOutput(once))
	if err != nil {
		stopTracing()
		return nil, err
	}
	return &Process{Once: once, Config: cfg, Logger: logger, Pool: pool, Registry: NewRegistry(pool), stopTracing: stopTracing}, nil
}

// RunService is what every background command does with its service. With once, one pass
// whose result is printed to stdout as one JSON line, for tests, cron and operators; otherwise
// the metrics in reg served at METRICS_ADDR (see ServeMetrics) and passes until ctx ends
// (SIGINT or SIGTERM), then a clean stop.
func RunService[R any](ctx context.Context, name string, once bool, svc Service[R], cfg *Config, reg *prometheus.Registry, stdout io.Writer, logger *slog.Logger) error {
	if once {
		result, err := svc.RunOnce(ctx)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(result)
	}

	if err := ServeMetrics(ctx, cfg, logger, reg); err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	logger.InfoContext(ctx, name+": started")
	<-ctx.Done()
	svc.Stop()
	logger.InfoContext(context.WithoutCancel(ctx), name+": stopped")
	return nil
}
