package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/cmd/internal/riders"
)

const (
	// raiseErrorShare is the share of rides that ask for a simulated failure, when allowed.
	raiseErrorShare = 0.1

	// giveUpAfter is how long the simulated app retries one ride before walking away.
	giveUpAfter = 30 * time.Second
)

func main() {
	cli.Main("simulator", run)
}

func run(ctx context.Context) error {
	flags := flag.NewFlagSet("simulator", flag.ContinueOnError)
	rides := flags.Int("rides", 0, "book this many rides, then exit (0: until stopped)")
	interval := flags.Duration("interval", time.Second, "pause between rides")
	numRiders := flags.Int("riders", 10, "ride as this many new riders in turn (unless SIMULATOR_TOKEN is set)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		return err
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	logger := bootstrap.NewLogger(os.Stdout, cfg)
	apiURL := os.Getenv("API_URL")
	if apiURL == "" {
		apiURL = "http://localhost:" + strconv.Itoa(cfg.Port)
	}

	if *numRiders < 1 {
		return &cli.UsageError{Err: fmt.Errorf("-riders must be at least 1, not %d", *numRiders)}
	}
	tokens := []string{os.Getenv("SIMULATOR_TOKEN")}
	if tokens[0] == "" {
		if tokens, err = createRiders(ctx, cfg, logger, *numRiders); err != nil {
			return err
		}
	}
	var clients []*client.Client
	for _, token := range tokens {
		clients = append(clients, &client.Client{BaseURL: apiURL, Token: token, MaxElapsed: giveUpAfter})
	}

	for n := 0; *rides == 0 || n < *rides; n++ {
		bookRide(ctx, clients[n%len(clients)], cfg.SimulateErrors && rand.Float64() < raiseErrorShare, logger)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
	return nil
}

// createRiders makes the simulator n riders of its own, with cards that work, and returns their
// API tokens.
func createRiders(ctx context.Context, cfg *bootstrap.Config, logger *slog.Logger, n int) ([]string, error) {
	tokenKey, err := cfg.TokenKey()
	if err != nil {
		return nil, err
	}
	sc, err := bootstrap.NewStripe(cfg, nil)
	if err != nil {
		return nil, err
	}
	pool, err := bootstrap.OpenPool(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var tokens []string
	for i := range n {
		created, err := riders.Create(ctx, pool, riders.Params{
			Email:     fmt.Sprintf("simulator+%d-%d@rocketrides.example", time.Now().UnixNano(), i),
			CardToken: "tok_visa",
			Stripe:    sc,
			TokenKey:  tokenKey,
		})
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, created.Token)
	}
	logger.InfoContext(ctx, "Simulator: riding as new riders", slog.Int("riders", n))
	return tokens, nil
}

func bookRide(ctx context.Context, c *client.Client, raiseError bool, logger *slog.Logger) {
	params := client.RideParams{
		OriginLat: 37.7 + rand.Float64()/10, OriginLon: -122.5 + rand.Float64()/10,
		TargetLat: 37.3 + rand.Float64()/10, TargetLon: -121.9 + rand.Float64()/10,
		RaiseError: raiseError,
	}
	result, err := c.CreateRide(ctx, params)

	var apiErr *client.APIError
	var unknown *client.UnknownOutcomeError
	switch {
	case err == nil:
		logger.InfoContext(ctx, "Simulator: ride booked", slog.String("ride_id", result.Ride.ID),
			slog.Int("attempts", result.Attempts), slog.Bool("replayed", result.Replayed))
	case errors.As(err, &apiErr):
		logger.WarnContext(ctx, "Simulator: ride refused", slog.Int("status", apiErr.StatusCode), slog.String("code", apiErr.Code))
	case errors.As(err, &unknown):
		logger.WarnContext(ctx, "Simulator: gave up on a ride; the completer will finish it",
			slog.String("idempotency_key", unknown.IdempotencyKey), slog.Int("attempts", unknown.Attempts),
			slog.String("last_error", unknown.Last.Error()),
			slog.Bool("raise_error", raiseError))
	default:
		logger.ErrorContext(ctx, "Simulator: ride failed", slog.String("error", err.Error()))
	}
}
