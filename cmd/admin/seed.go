package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/cmd/internal/seed"
)

// seedHistory fills the database with made-up riders and their finished rides, for benchmarks
// and demos, and prints what it made. Both counts must be given: a forgotten flag should not
// quietly seed some default amount, or nothing.
func seedHistory(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("seed", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	rides := flags.Int("rides", 0, "how many finished rides to make")
	riders := flags.Int("riders", 0, "how many riders to spread them over")
	if err := flags.Parse(args); err != nil {
		return &cli.UsageError{Err: fmt.Errorf("seed: %w", err)}
	}
	given := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["rides"] || !given["riders"] {
		return &cli.UsageError{Err: errors.New("seed: give both -rides and -riders")}
	}
	if flags.NArg() > 0 {
		return &cli.UsageError{Err: fmt.Errorf("seed: unexpected argument %q", flags.Arg(0))}
	}
	opts := seed.Options{Rides: *rides, Riders: *riders}
	if err := opts.Validate(); err != nil {
		return &cli.UsageError{Err: fmt.Errorf("seed: %w", err)}
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	cfg.SchemaAsIs = true
	_, pool, err := bootstrap.Open(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	defer pool.Close()

	start := time.Now()
	result, err := seed.Seed(ctx, pool, opts)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(struct {
		Riders        int     `json:"riders"`
		Rides         int     `json:"rides"`
		SequentialIDs bool    `json:"sequential_ids"`
		Seconds       float64 `json:"seconds"`
	}{result.Riders, result.Rides, result.SequentialIDs, time.Since(start).Seconds()})
}
