package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/rocketrides/rocketrides/client"
)

// callKind tells a call under a fresh key from one that re-sends an earlier key.
type callKind int

const (
	kindNew callKind = iota
	kindReplay
	numKinds
)

// firstAnswer is what a key got the first time, which every replay of it must give back.
type firstAnswer struct {
	key    string
	params client.RideParams
	rideID string // "" for a refusal
	status int
	code   string
}

// tally is what one client saw; the clients' tallies are added up once they are done.
type tally struct {
	calls      [numKinds]int
	booked     int
	replays    int
	refusals   int
	unknown    int
	unexpected int
	mismatches int
	attempts   int
	maxAttempt int
	latencies  [numKinds][]time.Duration
	failures   []string
}

func (t *tally) add(o *tally) {
	for k := range numKinds {
		t.calls[k] += o.calls[k]
		t.latencies[k] = append(t.latencies[k], o.latencies[k]...)
	}
	t.booked += o.booked
	t.replays += o.replays
	t.refusals += o.refusals
	t.unknown += o.unknown
	t.unexpected += o.unexpected
	t.mismatches += o.mismatches
	t.attempts += o.attempts
	t.maxAttempt = max(t.maxAttempt, o.maxAttempt)
	t.failures = append(t.failures, o.failures...)
}

// result is the whole run.
type result struct {
	tally
	elapsed time.Duration

	// conflicts counts the 409 answers, which the client retried within its calls.
	conflicts int64
}

func (r *result) failed() bool { return r.unknown+r.unexpected+r.mismatches > 0 }

// load runs one concurrent client per element of clients until duration is over, until each
// client has made the given number of calls (if calls is not 0), or until a call fails: a failed run's figures mean nothing, so there is no point in loading the API
// further. Calls under way are let finish under ctx, so that stopping the load does not itself
// make outcomes unknown. The clients may be one rider's or each a rider of its own.
func load(ctx context.Context, clients []*client.Client, counter *conflictCounter, duration time.Duration, calls int, replayShare float64) *result {
	loadCtx, stopLoad := context.WithTimeout(ctx, duration)
	defer stopLoad()

	start := time.Now()
	conflictsBefore := counter.conflicts.Load()
	tallies := make([]tally, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			t := &tallies[i]
			var answered []firstAnswer
			for made := 0; loadCtx.Err() == nil && (calls == 0 || made < calls); made++ {
				if len(answered) > 0 && rand.Float64() < replayShare {
					t.replay(ctx, c, answered[rand.IntN(len(answered))])
				} else if first, ok := t.book(ctx, c); ok {
					answered = append(answered, first)
				}
				if len(t.failures) > 0 {
					stopLoad()
				}
			}
		})
	}
	wg.Wait()

	res := &result{elapsed: time.Since(start), conflicts: counter.conflicts.Load() - conflictsBefore}
	for i := range tallies {
		res.add(&tallies[i])
	}
	return res
}

// book makes a call under a fresh key, and returns the first answer when it was definitive.
func (t *tally) book(ctx context.Context, c *client.Client) (firstAnswer, bool) {
	key, err := client.NewIdempotencyKey()
	if err != nil {
		t.fail(&t.unexpected, fmt.Sprintf("new key: %s", err))
		return firstAnswer{}, false
	}
	params := client.RideParams{
		OriginLat: 37.7 + rand.Float64()/10, OriginLon: -122.5 + rand.Float64()/10,
		TargetLat: 37.3 + rand.Float64()/10, TargetLon: -121.9 + rand.Float64()/10,
	}
	result, attempts, err := t.call(ctx, c, kindNew, key, params)

	var apiErr *client.APIError
	switch {
	case err == nil:
		t.booked++
		return firstAnswer{key: key, params: params, rideID: result.Ride.ID, status: http.StatusCreated}, true
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusPaymentRequired:
		t.refusals++
		return firstAnswer{key: key, params: params, status: apiErr.StatusCode, code: apiErr.Code}, true
	default:
		t.failCall(err, key, attempts)
		return firstAnswer{}, false
	}
}

// replay sends first's key and params again, and checks that the answer is first's, replayed.
func (t *tally) replay(ctx context.Context, c *client.Client, first firstAnswer) {
	result, attempts, err := t.call(ctx, c, kindReplay, first.key, first.params)

	var apiErr *client.APIError
	var unknown *client.UnknownOutcomeError
	switch {
	case err == nil && first.rideID != "" && result.Replayed && result.Ride.ID == first.rideID:
		t.replays++
	case errors.As(err, &apiErr) && first.rideID == "" && apiErr.Replayed && apiErr.StatusCode == first.status && apiErr.Code == first.code:
		t.replays++
	case err == nil:
		t.fail(&t.mismatches, fmt.Sprintf("key %s first booked ride %s (%d %s), again got ride %s (replayed %t)",
			first.key, first.rideID, first.status, first.code, result.Ride.ID, result.Replayed))
	case errors.As(err, &unknown):
		t.failCall(err, first.key, attempts)
	default:
		t.fail(&t.mismatches, fmt.Sprintf("key %s first got ride %q (%d %s), again got: %s",
			first.key, first.rideID, first.status, first.code, err))
	}
}

// call makes one client call, keeping its latency and attempts.
func (t *tally) call(ctx context.Context, c *client.Client, kind callKind, key string, params client.RideParams) (*client.Result, int, error) {
	start := time.Now()
	result, err := c.CreateRideWithKey(ctx, key, params)
	t.latencies[kind] = append(t.latencies[kind], time.Since(start))
	t.calls[kind]++

	var attempts int
	var apiErr *client.APIError
	var unknown *client.UnknownOutcomeError
	switch {
	case err == nil:
		attempts = result.Attempts
	case errors.As(err, &apiErr):
		attempts = apiErr.Attempts
	case errors.As(err, &unknown):
		attempts = unknown.Attempts
	}
	t.attempts += attempts
	t.maxAttempt = max(t.maxAttempt, attempts)
	return result, attempts, err
}

// failCall counts a call that ended in an unknown outcome or an unexpected error.
func (t *tally) failCall(err error, key string, attempts int) {
	var unknown *client.UnknownOutcomeError
	if errors.As(err, &unknown) {
		t.fail(&t.unknown, fmt.Sprintf("key %s: outcome unknown after %d attempts: %s", key, attempts, unknown.Last))
		return
	}
	t.fail(&t.unexpected, fmt.Sprintf("key %s: %s", key, err))
}

func (t *tally) fail(counter *int, msg string) {
	*counter++
	t.failures = append(t.failures, msg)
}
