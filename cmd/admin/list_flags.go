package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/models"
)

// listFlags are the flags every list command takes: how many rows at most, between 1 and max,
// which ones described by which (the newest, the oldest), and -json for one object per line
// instead of a table.
type listFlags struct {
	limit  int
	asJSON bool
}

// parseListFlags parses a list command's args.
func parseListFlags(command string, args []string, max int, which string) (*listFlags, error) {
	flags := flag.NewFlagSet(command, flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	f := &listFlags{}
	flags.IntVar(&f.limit, "limit", 100, "show at most this many, "+which)
	flags.BoolVar(&f.asJSON, "json", false, "print one JSON object per line instead of a table")
	if err := flags.Parse(args); err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	if f.limit < 1 || f.limit > max {
		return nil, fmt.Errorf("%s: -limit must be between 1 and %d, not %d", command, max, f.limit)
	}
	return f, nil
}

// listLimitMax bounds -limit of the lists read from our own tables.
const listLimitMax = 100_000

// openDatabase connects to the database the environment names.
func openDatabase(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	_, pool, err := bootstrap.Open(ctx, cfg, os.Stderr)
	return pool, err
}

// runList is a list command read from our own tables: its flags, the rows list returns, and
// those rows printed in format.
func runList[T any](ctx context.Context, command string, args []string, which string,
	list func(ctx context.Context, db models.DBTX, limit int) ([]T, error), format listFormat[T]) error {
	f, err := parseListFlags(command, args, listLimitMax, which)
	if err != nil {
		return err
	}
	pool, err := openDatabase(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	rows, err := list(ctx, pool, f.limit)
	if err != nil {
		return err
	}
	return format.write(os.Stdout, rows, f.asJSON)
}
