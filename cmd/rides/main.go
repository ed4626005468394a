// Command rides books a ride, or cancels one, from the command line with the retrying client, as
// the mobile app would, and prints the outcome as one JSON line:
//
//	go run ./cmd/rides -token rr_... -from 37.7749,-122.4194 -to 37.3382,-121.8863 [-key K]
//	go run ./cmd/rides -token rr_... -cancel RIDE_ID [-key K]
//
// Exit status: 0 booked or cancelled, 1 refused (the answer is final), 2 bad usage, 3 outcome
// unknown (run it again with the printed -key to find out; it cannot book or refund twice).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/rocketrides/rocketrides/client"
)

// Exit statuses.
const (
	exitBooked  = 0
	exitRefused = 1
	exitUsage   = 2
	exitUnknown = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// outcome is the line printed.
type outcome struct {
	Outcome        string       `json:"outcome"` // booked, cancelled, refused or unknown
	IdempotencyKey string       `json:"idempotency_key"`
	Attempts       int          `json:"attempts,omitempty"`
	Replayed       bool         `json:"replayed,omitempty"`
	Ride           *client.Ride `json:"ride,omitempty"`
	Status         int          `json:"status,omitempty"`
	Code           string       `json:"code,omitempty"`
	DeclineCode    string       `json:"decline_code,omitempty"` // the card issuer's reason, for card_declined
	Error          string       `json:"error,omitempty"`
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("rides", flag.ContinueOnError)
	flags.SetOutput(stderr)
	apiURL := flags.String("api", cmp.Or(getenv("API_URL"), client.DefaultBaseURL), "the API's base URL (API_URL)")
	token := flags.String("token", getenv("RIDES_TOKEN"), "the rider's API token (RIDES_TOKEN)")
	key := flags.String("key", "", "the Idempotency-Key; a new UUID when empty. Reuse a printed one to retry safely.")
	from := flags.String("from", "", "origin as lat,lon")
	to := flags.String("to", "", "destination as lat,lon")
	cancel := flags.String("cancel", "", "cancel the ride of this id and refund it, instead of booking one")
	raiseError := flags.Bool("raise-error", false, "ask the server to fail after ride_created (needs SIMULATE_ERRORS)")
	giveUp := flags.Duration("give-up-after", client.DefaultMaxElapsed, "how long to keep retrying")
	if err := flags.Parse(args); err != nil {
		return exitUsage
	}

	params := client.RideParams{RaiseError: *raiseError}
	var err error
	switch {
	case *cancel != "" && (*from != "" || *to != "" || *raiseError):
		fmt.Fprintln(stderr, "rides: -cancel takes no -from, -to or -raise-error")
		return exitUsage
	case *cancel != "":
	default:
		if params.OriginLat, params.OriginLon, err = parsePoint(*from); err != nil {
			fmt.Fprintf(stderr, "rides: -from: %s\n", err)
			return exitUsage
		}
		if params.TargetLat, params.TargetLon, err = parsePoint(*to); err != nil {
			fmt.Fprintf(stderr, "rides: -to: %s\n", err)
			return exitUsage
		}
	}
	if *token == "" {
		fmt.Fprintln(stderr, "rides: -token (or RIDES_TOKEN) is required")
		return exitUsage
	}
	if *key == "" {
		if *key, err = client.NewIdempotencyKey(); err != nil {
			fmt.Fprintf(stderr, "rides: %s\n", err)
			return exitUsage
		}
	}

	c := &client.Client{BaseURL: *apiURL, Token: *token, MaxElapsed: *giveUp}
	var result *client.Result
	done := "booked"
	if *cancel != "" {
		result, err = c.CancelRideWithKey(ctx, *key, *cancel)
		done = "cancelled"
	} else {
		result, err = c.CreateRideWithKey(ctx, *key, params)
	}

	var apiErr *client.APIError
	var unknown *client.UnknownOutcomeError
	out := outcome{IdempotencyKey: *key}
	code := exitBooked
	switch {
	case err == nil:
		out.Outcome, out.Attempts, out.Replayed, out.Ride = done, result.Attempts, result.Replayed, result.Ride
	case errors.As(err, &apiErr):
		out.Outcome, out.Attempts, out.Replayed = "refused", apiErr.Attempts, apiErr.Replayed
		out.Status, out.Code, out.DeclineCode, out.Error = apiErr.StatusCode, apiErr.Code, apiErr.DeclineCode, apiErr.Detail
		code = exitRefused
	case errors.As(err, &unknown):
		out.Outcome, out.Attempts, out.Error = "unknown", unknown.Attempts, unknown.Last.Error()
		code = exitUnknown
	default:
		out.Outcome, out.Error = "unknown", err.Error()
		code = exitUnknown
	}
	_ = json.NewEncoder(stdout).Encode(out)
	return code
}

func parsePoint(s string) (lat, lon float64, err error) {
	latText, lonText, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, errors.New("want lat,lon")
	}
	if lat, err = strconv.ParseFloat(strings.TrimSpace(latText), 64); err != nil {
		return 0, 0, errors.New("the latitude is not a number")
	}
	if lon, err = strconv.ParseFloat(strings.TrimSpace(lonText), 64); err != nil {
		return 0, 0, errors.New("the longitude is not a number")
	}
	return lat, lon, nil
}
