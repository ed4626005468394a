// Package phases is the state machine of "Implementing Stripe-like Idempotency Keys in
// Postgres": a ride request broken into phases, each of which commits the recovery point it
// reached together with its work, so that a retry resumes where the last attempt stopped.
//
// The phases form a directed acyclic graph:
//
//	(upsert the idempotency key: upsert_idempotency_key.go)
//	started        -> ride_created   (create_ride_record.go: ride + audit record)
//	ride_created   -> charge_created (charge_ride.go: the foreign state mutation, a Stripe charge)
//	charge_created -> finished       (stage_receipt.go: stage the receipt job, store the response)
//
// A phase may also jump straight to finished with a Response (a declined card), which is stored
// on the key and replayed to every retry.
//
// An atomic phase, in the article's own definition, is the local work between two foreign state
// mutations. The request has one, the charge, so a new request commits twice: once with
// everything up to the charge (key, ride, audit record, and the note that a charge is about to
// be sent), and once with everything after it (the charge id, the staged receipt, the response).
// createRide (create_ride.go) reads as that loop; the Executor (this file) and atomicPhase
// (atomic_phase.go) are the machinery under it: the SERIALIZABLE transaction and its retries,
// the lease on the key and the fence on its writes.
package phases

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// Config tunes the executor. The zero value of each field means its default.
type Config struct {
	// LockLease is how long a request's lock on its key lasts unless renewed. The request
	// renews it every LockLease/3 while it runs (see keepLease), and every atomic phase's commit
	// renews it too, so a request may take far longer than its lease; a request that died stops
	// renewing, and its key is free for a retry within one lease. Default 5 s: a rider retrying
	// after a crash waits seconds, not the article's 90 s lock timeout, and a renewal can be
	// missed twice, to a slow database say, before the lease runs out.
	LockLease time.Duration

	// StripeKeyMaxAge is how long after the first charge attempt we still dare re-send a charge.
	// Stripe forgets idempotency keys after 24 h; past that, a re-sent charge could be a second
	// charge. Default 23 h. See StripeKeyMemory for why it and RequestTimeout must stay under 24 h.
	StripeKeyMaxAge time.Duration

	// RequestTimeout bounds one run of a request, Stripe call included: CreateRide gives up
	// after it, with nothing committed past the last atomic phase. Default 45 s.
	RequestTimeout time.Duration

	// ConflictRetryBudget bounds how long an atomic phase keeps retrying serialization failures
	// and deadlocks before the request gives up with ErrConflict. Default 2 s: well past what a
	// burst of conflicts takes to clear, and short enough that the rider's app retries (with
	// the same key) long before the rider gives up.
	ConflictRetryBudget time.Duration

	// PhaseTimeout bounds one atomic phase, its conflict retries included: how long a request
	// waits on a database that has stopped answering (for a pool connection, a lock, a
	// statement) before it gives up, unlocks its key and is answered 503 with Retry-After.
	// Default 5 s: a phase takes milliseconds, and its retries at most ConflictRetryBudget.
	PhaseTimeout time.Duration

	// SimulateErrors allows the raise_error demo parameter. Off in production.
	SimulateErrors bool

	// Faults, if set, is told each time a request passes a FaultPoint, so that failure tests can
	// crash or stall the process exactly there. Production leaves it nil.
	Faults FaultInjector

	// Metrics records how long atomic phases take and how often they are retried. Default: a
	// set that no registry holds.
	Metrics *metrics.Phases
}

// Defaults of Config.
const (
	LockLeaseDefault           = 5 * time.Second
	StripeKeyMaxAgeDefault     = 23 * time.Hour
	RequestTimeoutDefault      = 45 * time.Second
	ConflictRetryBudgetDefault = 2 * time.Second
	PhaseTimeoutDefault        = 5 * time.Second
)

// WithDefaults returns c with each zero field set to its default: the settings an Executor of c
// runs with.
func (c Config) WithDefaults() Config {
	c.LockLease = cmp.Or(c.LockLease, LockLeaseDefault)
	c.StripeKeyMaxAge = cmp.Or(c.StripeKeyMaxAge, StripeKeyMaxAgeDefault)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, RequestTimeoutDefault)
	c.ConflictRetryBudget = cmp.Or(c.ConflictRetryBudget, ConflictRetryBudgetDefault)
	c.PhaseTimeout = cmp.Or(c.PhaseTimeout, PhaseTimeoutDefault)
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c
}

// NewMetrics returns the executor's series (Config.Metrics), registered with reg (nil:
// unregistered), labelled by the recovery points an atomic phase starts from.
func NewMetrics(reg prometheus.Registerer) *metrics.Phases {
	return metrics.NewPhases(reg, string(models.RecoveryPointStarted), string(models.RecoveryPointRideCreated), string(models.RecoveryPointChargeCreated))
}

// StripeKeyMemory is how long Stripe keeps an idempotency key and replays its first answer.
// StripeKeyMaxAge plus RequestTimeout must stay under it: internal/bootstrap's checkRules, the
// home of every rule that ties two settings together, says why.
const StripeKeyMemory = 24 * time.Hour

// LockLeaseMin keeps renewals, a third of the lease apart, well above a database round trip.
const LockLeaseMin = time.Second

// Executor runs ride requests through the phases. It is safe for concurrent use; every piece
// of request state lives in Postgres, so any number of executors in any number of processes
// may work the same keys.
type Executor struct {
	config Config
	logger *slog.Logger
	pool   *pgxpool.Pool
	stripe *client.API

	// stripeKeySecret is the database's secret for Stripe idempotency keys, once read.
	stripeKeySecret atomic.Pointer[[]byte]

	// stagedJobs wakes the enqueuer once a request committed staged jobs.
	stagedJobs *stagedJobsNotifier

	// hooks are nil outside this package's tests.
	hooks testHooks
}

// New returns an Executor that keeps its state in pool and charges through stripe.
func New(pool *pgxpool.Pool, stripe *client.API, logger *slog.Logger, config Config) *Executor {
	return &Executor{
		config: config.WithDefaults(),
		logger: logger,
		pool:   pool,
		stripe: stripe,

		stagedJobs: newStagedJobsNotifier(pool, logger),
	}
}

// Outcome is a finished request's stored response.
type Outcome struct {
	StatusCode int
	Body       []byte

	// Replayed is true when the request had finished before this call, so that this is a
	// replay of a response some earlier call received.
	Replayed bool
}

// keyRequest is what every request type tells the executor about itself: which key it runs
// under, and what the key stores and compares against every retry of it.
type keyRequest struct {
	user           *models.User
	idempotencyKey string
	method, path   string
	originIP       netip.Addr

	// params are stored on a new key as JSON; sameParams compares a retry's with them.
	params     any
	sameParams func(stored json.RawMessage) (bool, error)

	// resumeOnly makes the request work only a key that exists, and fail with ErrKeyNotFound
	// rather than create one. The completer sets it: a key reaped between the completer finding
	// it and running it must not come back as a new request, with a new charge or refund.
	resumeOnly bool

	// admitNewKey, when set, is asked before a new key is made, and only then: an error refuses
	// the request, which stores nothing and returns the error as it is. The API spends a rider's
	// budget of new bookings (or cancels) here, the one moment it knows a request is not a
	// replay or a retry of a key. It may be asked again if the transaction is retried.
	admitNewKey func() error
}

// sameParamsAs returns the comparison of a key's stored params with params, decoded into their
// own type: parsed values compare equal where their JSON might not ("0" and "0.0").
func sameParamsAs[P comparable](params P) func(stored json.RawMessage) (bool, error) {
	return func(stored json.RawMessage) (bool, error) {
		var s P
		if err := json.Unmarshal(stored, &s); err != nil {
			return false, fmt.Errorf("error decoding stored request params: %w", err)
		}
		return s == params, nil
	}
}

// run is one run of a request through the phases: what it has learned so far.
type run struct {
	req keyRequest

	// key is the key as the last atomic phase committed it; nil until the first one has.
	key *models.IdempotencyKey

	// lockGeneration is this run's fencing token: the lock generation it took the key's lock
	// with; 0 until it has.
	lockGeneration int64

	// mu is held by an atomic phase for its transaction, and by keepLease for a renewal, so that
	// the request never updates its own key from two transactions at once. A pointer, because
	// an atomic phase copies the run to start again from it.
	mu *sync.Mutex

	// replayed is set when the key had finished before this run.
	replayed bool

	// ride is the request's ride, once created or read.
	ride *models.Ride

	// staged is set by a phase that staged a job, so that the enqueuer is woken once the
	// request's last commit is done.
	staged bool
}

// runRequest runs a request of any type to its end, or as far as it can get: graph is the
// request's own sequence of atomic phases and foreign state mutations (createRide, cancelRide).
// It resumes from the key's recovery point when the key exists, and returns the stored response
// when the key finished before. On an error the key is unlocked at its last recovery point, so
// that a retry (the client's or the completer's) resumes from there.
func (e *Executor) runRequest(ctx context.Context, req keyRequest, graph func(ctx context.Context, r *run) error) (*Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, e.config.RequestTimeout)
	defer cancel()
	r := &run{req: req, mu: &sync.Mutex{}}
	if err := graph(ctx, r); err != nil {
		e.unlockAfterError(ctx, r, err)
		return nil, err
	}
	if r.staged {
		e.stagedJobs.poke()
	}

	// Postgres hands jsonb back in its own layout; compacting it keeps what clients see small
	// and identical between the first answer and every replay.
	var body bytes.Buffer
	if err := json.Compact(&body, r.key.ResponseBody); err != nil {
		return nil, fmt.Errorf("error compacting stored response: %w", err)
	}
	return &Outcome{StatusCode: *r.key.ResponseCode, Body: body.Bytes(), Replayed: r.replayed}, nil
}

// keepLease renews the lease on r's key every third of Config.LockLease until the returned
// function stops it; createRide starts it once the first atomic phase has committed the lock. A
// renewal that fails for want of a database is tried again at the next tick; one that
// finds the key taken over stops renewing. Neither stops the request: if another request took
// its key over, the request's next atomic phase finds a newer lock generation and commits
// nothing (ErrLockLost), and that is where it ends.
func (e *Executor) keepLease(ctx context.Context, r *run) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mu := r.mu // read here, before any atomic phase rewrites the run (with the same mutex)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(e.config.LockLease / 3)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if !e.renewLease(ctx, r, mu) {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// renewLease renews the lease on r's key once, and reports whether to go on renewing. mu is r's.
func (e *Executor) renewLease(ctx context.Context, r *run, mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	if r.key == nil || r.lockGeneration == 0 {
		return true // no lock yet
	}
	if r.key.RecoveryPoint == models.RecoveryPointFinished {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, e.config.LockLease/3)
	defer cancel()
	held, err := models.IdempotencyKeyRenewLease(ctx, e.pool, r.key.UserID, r.key.ID, r.lockGeneration, e.config.LockLease)
	if err != nil {
		e.logger.WarnContext(ctx, "Phases: failed to renew the lease of an idempotency key",
			slog.Int64("idempotency_key_id", r.key.ID), slog.String("error", err.Error()))
		return true
	}
	if !held {
		e.logger.WarnContext(ctx, "Phases: lost the lease of an idempotency key to another request",
			slog.Int64("idempotency_key_id", r.key.ID), slog.Int64("lock_generation", r.lockGeneration))
	}
	return held
}

// unlockTimeout bounds the unlock that follows a failed run. It gets a context of its own
// because the failure may have been the request's context ending.
const unlockTimeout = 5 * time.Second

// UnlockAfterOutageTimeout bounds the unlock that follows a run the database did not answer
// (a statement that timed out, a connection lost or never had, a commit unconfirmed): the
// database will hardly answer the unlock either, and the rider should have the 503 within the
// phase's deadline and this, not twice the deadline. An unlock that fails leaves the key to its
// lease, which frees it within Config.LockLease.
const UnlockAfterOutageTimeout = time.Second

// unlockAfterError releases the key so that a retry need not wait out the lock timeout. A
// request that never locked its key, or lost its lock, has nothing to release.
func (e *Executor) unlockAfterError(ctx context.Context, r *run, runErr error) {
	if errors.Is(runErr, ErrLockLost) || r.key == nil || r.lockGeneration == 0 {
		return
	}
	timeout := unlockTimeout
	if models.IsUnavailable(runErr) || errors.Is(runErr, ErrCommitOutcomeUnknown) {
		timeout = UnlockAfterOutageTimeout
	}
	if e.hooks.unlockTimeout != nil {
		e.hooks.unlockTimeout(timeout)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()

	if _, err := models.IdempotencyKeyUnlock(ctx, e.pool, r.key.UserID, r.key.ID, r.lockGeneration, runErr.Error()); err != nil {
		// The lease runs out by itself; a retry is only delayed by that much.
		e.logger.ErrorContext(ctx, "Phases: failed to unlock idempotency key",
			slog.Int64("idempotency_key_id", r.key.ID), slog.String("error", err.Error()))
	}
}

// Resume runs an unfinished key's request to its end as its client would have, as user (the
// key's), with the stored parameters and origin IP: the completer's way in, for requests of
// every type. It works only a key that exists (ResumeOnly).
func (e *Executor) Resume(ctx context.Context, user *models.User, key *models.IdempotencyKey) (*Outcome, error) {
	switch {
	case key.RequestPath == CreateRidePath:
		var params RideParams
		if err := json.Unmarshal(key.RequestParams, &params); err != nil {
			return nil, fmt.Errorf("error decoding params of idempotency key %d: %w", key.ID, err)
		}
		return e.CreateRide(ctx, &CreateRideRequest{User: user, IdempotencyKey: key.IdempotencyKey,
			Params: params, OriginIP: key.OriginIP, ResumeOnly: true})
	default:
		var params CancelRideParams
		if err := json.Unmarshal(key.RequestParams, &params); err != nil || key.RequestPath != CancelRidePath(params.RideID) {
			return nil, fmt.Errorf("idempotency key %d is of no request this release knows: %s %s", key.ID, key.RequestMethod, key.RequestPath)
		}
		return e.CancelRide(ctx, &CancelRideRequest{User: user, IdempotencyKey: key.IdempotencyKey,
			RideID: params.RideID, OriginIP: key.OriginIP, ResumeOnly: true})
	}
}
