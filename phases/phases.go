// Package phases is the state machine of "Implementing Stripe-like Idempotency Keys in
// Postgres": a ride request broken into atomic phases, each one SERIALIZABLE transaction that
// commits the recovery point it reached, so that a retry resumes where the last attempt stopped.
//
// The phases form a directed acyclic graph:
//
//	tx1 upsert idempotency key       (upsert_idempotency_key.go)
//	started        -> ride_created   (create_ride_record.go: ride + audit record)
//	ride_created   -> charge_created (charge_ride.go: the foreign state mutation, a Stripe charge)
//	charge_created -> finished       (send_receipt.go: stage the receipt job, store the response)
//
// A phase may also jump straight to finished with a Response (a declined card), which is stored
// on the key and replayed to every retry.
package phases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/models"
)

// Config tunes the executor. The zero value of each field means its default.
type Config struct {
	// LockTimeout is how long a request may hold a key before another request may take it over.
	// It must be well above the longest a request can take (the Stripe call's timeout
	// included), or two requests would work one key at once. Default 90 s, as in the article.
	LockTimeout time.Duration

	// StripeKeyMaxAge is how long after the first charge attempt we still dare re-send a charge.
	// Stripe forgets idempotency keys after 24 h; past that, a re-sent charge could be a second
	// charge. Default 23 h, an hour of margin for clock skew and slow requests.
	StripeKeyMaxAge time.Duration

	// MaxPhaseAttempts bounds how often a phase is retried after a serialization failure or a
	// deadlock before the request gives up with ErrConflict. Default 8: under SERIALIZABLE,
	// concurrent requests of one rider conflict on shared index pages even with different
	// keys, and a burst of them needs a few rounds of jittered backoff to get through.
	MaxPhaseAttempts int

	// SimulateErrors allows the raise_error demo parameter. Off in production.
	SimulateErrors bool

	// Faults, if set, is told each time a request passes a FaultPoint, so that failure tests can
	// crash or stall the process exactly there. Production leaves it nil.
	Faults FaultInjector
}

// FaultPoint names a moment in a request at which failure tests crash or stall the process.
type FaultPoint string

// The fault points: right after each recovery point commits, and between Stripe's answer to a
// successful charge and the phase that records it (the worst moment to die: Stripe charged and
// we do not know it yet).
const (
	FaultPointStarted        FaultPoint = "started"
	FaultPointRideCreated    FaultPoint = "ride_created"
	FaultPointChargeCreated  FaultPoint = "charge_created"
	FaultPointChargeAnswered FaultPoint = "charge_answered"
)

// FaultInjector acts at fault points; see internal/faults.
type FaultInjector interface {
	At(ctx context.Context, point FaultPoint)
}

func (c Config) withDefaults() Config {
	if c.LockTimeout == 0 {
		c.LockTimeout = 90 * time.Second
	}
	if c.StripeKeyMaxAge == 0 {
		c.StripeKeyMaxAge = 23 * time.Hour
	}
	if c.MaxPhaseAttempts == 0 {
		c.MaxPhaseAttempts = 8
	}
	return c
}

// Executor runs ride requests through the phases. It is safe for concurrent use; every piece
// of request state lives in Postgres, so any number of executors in any number of processes
// may work the same keys.
type Executor struct {
	config Config
	logger *slog.Logger
	pool   *pgxpool.Pool
	stripe *client.API

	// hooks are nil outside this package's tests.
	hooks testHooks
}

// testHooks let tests stop a request at a precise point to play a failure out.
type testHooks struct {
	// inPhase runs inside every atomic phase's transaction, after the phase's own work.
	inPhase func(ctx context.Context, tx pgx.Tx, point models.RecoveryPoint) error
	// afterCharge runs once Stripe has answered, before the answer is committed.
	afterCharge func(ctx context.Context)
}

// New returns an Executor that keeps its state in pool and charges through stripe.
func New(pool *pgxpool.Pool, stripe *client.API, logger *slog.Logger, config Config) *Executor {
	return &Executor{
		config: config.withDefaults(),
		logger: logger,
		pool:   pool,
		stripe: stripe,
	}
}

// Config returns the executor's configuration with defaults filled in.
func (e *Executor) Config() Config { return e.config }

// CreateRideRequest is one POST /rides, already authenticated and validated.
type CreateRideRequest struct {
	User           *models.User
	IdempotencyKey string
	Params         RideParams
	OriginIP       netip.Addr

	// RaiseError makes the request fail right after ride_created, to demonstrate recovery.
	// Honoured only when Config.SimulateErrors is set; not part of the compared params.
	RaiseError bool

	// ResumeOnly makes the request work only a key that exists, and fail with ErrKeyNotFound
	// rather than create one. The completer sets it: a key reaped between the completer finding
	// it and running it must not come back as a new request, with a new ride and a new charge.
	ResumeOnly bool
}

// Outcome is a finished request's stored response.
type Outcome struct {
	StatusCode int
	Body       []byte

	// Replayed is true when the request had finished before this call, so that this is a
	// replay of a response some earlier call received.
	Replayed bool
}

// The request path and method stored on every key this package creates.
const (
	requestMethod = "POST"
	requestPath   = "/rides"
)

// CreateRide runs a ride request to its end, or as far as it can get. It resumes from the key's
// recovery point when the key exists, and returns the stored response when the key finished
// before. On an error the key is unlocked at its last recovery point, so that a retry (the
// client's or the completer's) resumes from there.
func (e *Executor) CreateRide(ctx context.Context, req *CreateRideRequest) (*Outcome, error) {
	if req.RaiseError && !e.config.SimulateErrors {
		return nil, ErrSimulationDisabled
	}

	key, replayed, err := e.upsertIdempotencyKey(ctx, req)
	if err != nil {
		return nil, err
	}
	if !replayed && key.RecoveryPoint == models.RecoveryPointStarted {
		e.faultPoint(ctx, FaultPointStarted)
	}

	if !replayed {
		if err := e.runPhases(ctx, key, req); err != nil {
			e.unlockAfterError(ctx, key, err)
			return nil, err
		}
	}

	// Postgres hands jsonb back in its own layout; compacting it keeps what clients see small
	// and identical between the first answer and every replay.
	var body bytes.Buffer
	if err := json.Compact(&body, key.ResponseBody); err != nil {
		return nil, fmt.Errorf("error compacting stored response: %w", err)
	}
	return &Outcome{StatusCode: *key.ResponseCode, Body: body.Bytes(), Replayed: replayed}, nil
}

// runPhases walks the graph from the key's recovery point until the key is finished. Each phase
// updates key in place when it commits.
func (e *Executor) runPhases(ctx context.Context, key *models.IdempotencyKey, req *CreateRideRequest) error {
	for {
		var err error
		switch key.RecoveryPoint {
		case models.RecoveryPointStarted:
			err = e.createRideRecord(ctx, key, req)
		case models.RecoveryPointRideCreated:
			err = e.chargeRide(ctx, key, req)
		case models.RecoveryPointChargeCreated:
			err = e.sendReceipt(ctx, key, req)
		case models.RecoveryPointFinished:
			return nil
		default:
			return fmt.Errorf("bug: unhandled recovery point %q", key.RecoveryPoint)
		}
		if err != nil {
			return err
		}
		switch key.RecoveryPoint {
		case models.RecoveryPointRideCreated:
			e.faultPoint(ctx, FaultPointRideCreated)
		case models.RecoveryPointChargeCreated:
			e.faultPoint(ctx, FaultPointChargeCreated)
		}
	}
}

// faultPoint tells the fault injector, if any, that the request is at point.
func (e *Executor) faultPoint(ctx context.Context, point FaultPoint) {
	if e.config.Faults != nil {
		e.config.Faults.At(ctx, point)
	}
}

// unlockTimeout bounds the unlock that follows a failed run. It gets a context of its own
// because the failure may have been the request's context ending.
const unlockTimeout = 5 * time.Second

// unlockAfterError releases the key so that a retry need not wait out the lock timeout. A
// request that lost its lock has nothing to release.
func (e *Executor) unlockAfterError(ctx context.Context, key *models.IdempotencyKey, runErr error) {
	if errors.Is(runErr, ErrLockLost) || key.LockedAt == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()

	if _, err := models.IdempotencyKeyUnlock(ctx, e.pool, key.ID, *key.LockedAt, runErr.Error()); err != nil {
		// The lock expires by itself after LockTimeout; a retry is only delayed.
		e.logger.ErrorContext(ctx, "Phases: failed to unlock idempotency key",
			slog.Int64("idempotency_key_id", key.ID), slog.String("error", err.Error()))
	}
}
