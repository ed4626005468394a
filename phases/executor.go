// Package phases is the state machine of "Implementing Stripe-like Idempotency Keys in
// Postgres". A request is broken into phases. Each phase commits its work together with the
// recovery point it reached, so a retry resumes where the last attempt stopped.
//
// A ride's phases form a directed acyclic graph (create_ride.go):
//
//	(upsert the idempotency key: upsert_idempotency_key.go)
//	started        -> ride_created   (createRideRecord: ride + audit record)
//	ride_created   -> charge_created (charge_ride.go: the foreign state mutation, a Stripe charge)
//	charge_created -> finished       (stageReceipt: stage the receipt job, store the response)
//
// A phase may also jump straight to finished with a Response (a declined card). The response is
// stored on the key and replayed to every retry. A cancel has its own graph, started ->
// refund_created -> finished (cancel_ride.go).
//
// An atomic phase, in the article's definition, is the local work between two foreign state
// mutations. Each request has one Stripe call (a ride's charge, a cancel's refund), so it
// commits twice: once with everything before the call, once with everything after it.
// runPhases (this file) is that loop, the same for both requests. atomicPhase
// (atomic_phase.go) is the machinery under it: the SERIALIZABLE transaction, its retries, the
// fence on the key's writes and the lease.
//
// The package also applies Stripe's webhook events to rides (webhook_events.go). That is no
// phase, but it writes the rides that the phases write, in the same kind of transaction.
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// Config tunes the executor. The zero value of each field means its default.
type Config struct {
	// LockLease is how long a request's lock on its key lasts unless renewed. A running request
	// renews it every LockLease/3 (keepLease) and at every commit, so it may run far longer. A
	// request that died stops renewing, and its key is free for a retry within one lease.
	// Default 5 s: a rider retrying after a crash waits seconds, not the article's 90 s, and
	// two renewals can be missed before the lease runs out.
	LockLease time.Duration

	// StripeKeyMaxAge is how long after the first attempt a Stripe call may still be sent again.
	// Stripe forgets idempotency keys after 24 h, and a call sent after that could charge or
	// refund twice. Default 23 h (see StripeKeyMemory).
	StripeKeyMaxAge time.Duration

	// RequestTimeout bounds one run of a request, its Stripe call included. Default 45 s.
	RequestTimeout time.Duration

	// ConflictRetryBudget bounds how long an atomic phase retries serialization failures and
	// deadlocks before the request gives up with ErrConflict. Default 2 s: longer than a burst
	// of conflicts lasts, and short enough for the app to retry before the rider gives up.
	ConflictRetryBudget time.Duration

	// PhaseTimeout bounds one atomic phase, its conflict retries included. It is how long a
	// request waits on a database that stopped answering before it gives up with a 503.
	// Default 5 s: a phase takes milliseconds, and its retries at most ConflictRetryBudget.
	PhaseTimeout time.Duration

	// SimulateErrors allows the raise_error demo parameter. Off in production.
	SimulateErrors bool

	// Faults, if set, is told each time a request passes a FaultPoint, where failure tests crash
	// or stall the process. Production leaves it nil.
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
// StripeKeyMaxAge plus RequestTimeout must stay under it: cmd/internal/bootstrap's checkRules, the
// home of every rule that ties two settings together, says why.
const StripeKeyMemory = 24 * time.Hour

// LockLeaseMin keeps renewals, a third of the lease apart, well above a database round trip.
const LockLeaseMin = time.Second

// Executor runs requests through the phases. It is safe for concurrent use. Every piece of
// request state lives in Postgres, so any number of executors, in any number of processes, may
// work the same keys.
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

// KeyedRequest is what every request that runs under an Idempotency-Key carries, whatever its
// type.
type KeyedRequest struct {
	User           *models.User
	IdempotencyKey string
	OriginIP       netip.Addr

	// ResumeOnly makes the request fail with ErrKeyNotFound when its key does not exist,
	// rather than create the key. The completer sets it: a key reaped between the completer
	// finding it and running it must not come back as a new request, with a new charge or
	// refund.
	ResumeOnly bool

	// AdmitNewKey, when set, is asked before a new key is made, and only then. An error refuses
	// the request: nothing is stored, and the error is returned as it is. The API spends a
	// rider's budget of new bookings (or cancels) here, the one moment it knows a request is
	// neither a replay nor a retry. It may be asked again if the transaction is retried.
	AdmitNewKey func() error
}

// request is one request as the executor runs it: the key it runs under, with what the key
// stores and compares against every retry, and the request type's own steps around its one
// foreign state mutation (see CreateRide and CancelRide).
type request struct {
	KeyedRequest
	path string // its method is methodPost

	// params are stored on a new key as JSON; sameParams compares a retry's with them.
	params     any
	sameParams func(stored json.RawMessage) (bool, error)

	// findRide reads the request's ride: the ride a booking made, the ride a cancel names.
	findRide func(ctx context.Context, db models.DBTX, key *models.IdempotencyKey) (*models.Ride, error)

	// beforeMutation are atomic phase 1's phases, run after the key's upsert. mutation is the
	// foreign state mutation, which send sends with no transaction open. afterMutation are
	// atomic phase 2's phases.
	beforeMutation steps
	mutation       foreignMutation
	send           func(ctx context.Context, r *run) *stripeAnswer
	afterMutation  steps

	// raiseError makes the request fail right before its foreign state mutation, to
	// demonstrate recovery (CreateRideRequest.RaiseError).
	raiseError bool
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
	req request

	// key is the key as the last atomic phase committed it; nil until the first one has.
	key *models.IdempotencyKey

	// lockGeneration is this run's fencing token: the lock generation it took the key's lock
	// with; 0 until it has.
	lockGeneration int64

	// mu is held by an atomic phase for its transaction, and by keepLease for a renewal, so that
	// the request never updates its own key from two transactions at once. A pointer, because
	// an atomic phase works on a copy of the run, which replaces the run once it committed.
	mu *sync.Mutex

	// replayed is set when the key had finished before this run.
	replayed bool

	// ride is the request's ride, once created or read.
	ride *models.Ride

	// answer is Stripe's answer to the foreign state mutation, once this run sent it.
	answer *stripeAnswer

	// staged is set by a phase that staged a job, so that the enqueuer is woken once the
	// request's last commit is done.
	staged bool
}

// runRequest runs a request of any type to its end, or as far as it can get. It resumes from
// the key's recovery point when the key exists, and returns the stored response when the key
// finished before. On an error the key is unlocked at its last recovery point, so that a retry
// (the client's or the completer's) resumes from there.
func (e *Executor) runRequest(ctx context.Context, req request) (*Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, e.config.RequestTimeout)
	defer cancel()
	r := &run{req: req, mu: &sync.Mutex{}}
	if err := e.runPhases(ctx, r); err != nil {
		e.unlockAfterError(ctx, r, err)
		return nil, err
	}
	if r.staged {
		e.stagedJobs.poke()
	}

	// Postgres hands jsonb back in its own layout. Compacting it keeps what clients see small,
	// and the same in the first answer and every replay.
	var body bytes.Buffer
	if err := json.Compact(&body, r.key.ResponseBody); err != nil {
		return nil, fmt.Errorf("error compacting stored response: %w", err)
	}
	return &Outcome{StatusCode: *r.key.ResponseCode, Body: body.Bytes(), Replayed: r.replayed}, nil
}

// runPhases is the article's loop, the same for every request type: atomic phase 1, the
// foreign state mutation, atomic phase 2, each from wherever the key stands.
func (e *Executor) runPhases(ctx context.Context, r *run) error {
	// Atomic phase 1: find or create the key and lock it (upsertIdempotencyKey), then the local
	// work up to the foreign state mutation.
	if err := e.atomicPhase(ctx, r, r.req.beforeMutation); err != nil || r.replayed {
		return err
	}
	if r.key.RecoveryPoint == models.RecoveryPointFinished {
		e.faultPoint(ctx, FaultPointFinished)
		return nil
	}
	// The request holds its key's lease from here on, for as long as it runs.
	defer e.keepLease(ctx, r)()

	// The foreign state mutation, with no transaction open, under the key's own Stripe
	// idempotency key, so that Stripe acts once however often this is retried.
	if r.key.RecoveryPoint == r.req.mutation.from {
		e.faultPoint(ctx, r.req.mutation.next)
		if r.req.raiseError {
			return ErrSimulated
		}
		if err := e.callStripe(ctx, r); err != nil {
			return err
		}
	}

	// Atomic phase 2: the local work after the foreign state mutation.
	if err := e.atomicPhase(ctx, r, r.req.afterMutation); err != nil {
		return err
	}
	e.faultPoint(ctx, FaultPoint(r.key.RecoveryPoint))
	return nil
}

// loadRide reads the request's ride, unless this run has it already.
func (e *Executor) loadRide(ctx context.Context, tx *phaseTx, r *run) error {
	if r.ride != nil {
		return nil
	}
	ride, err := r.req.findRide(ctx, tx, r.key)
	if err != nil {
		return fmt.Errorf("bug: no ride for key %d at %s: %w", r.key.ID, r.key.RecoveryPoint, err)
	}
	r.ride = ride
	return nil
}

// auditRide records, in the phase's transaction, what the request did to its ride.
func auditRide(tx *phaseTx, r *run, action string) {
	models.AuditRecordInsert(&tx.Writes, models.AuditRecordInsertParams{
		ID:           models.NewID(),
		Action:       action,
		Data:         r.key.RequestParams,
		OriginIP:     r.req.OriginIP,
		ResourceID:   r.ride.ID,
		ResourceType: "ride",
		UserID:       r.key.UserID,
	})
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

// Resume runs an unfinished key's request to its end as its client would have: as user (the
// key's), with the stored parameters and origin IP. It is the completer's way in, for requests
// of every type, and works only a key that exists (ResumeOnly).
func (e *Executor) Resume(ctx context.Context, user *models.User, key *models.IdempotencyKey) (*Outcome, error) {
	switch {
	case key.RequestPath == CreateRidePath:
		var params RideParams
		if err := json.Unmarshal(key.RequestParams, &params); err != nil {
			return nil, fmt.Errorf("error decoding params of idempotency key %d: %w", key.ID, err)
		}
		return e.CreateRide(ctx, &CreateRideRequest{KeyedRequest: resumed(user, key), Params: params})
	case isCancelRidePath(key.RequestPath):
		var params CancelRideParams
		if err := json.Unmarshal(key.RequestParams, &params); err != nil || key.RequestPath != CancelRidePath(params.RideID) {
			return nil, fmt.Errorf("idempotency key %d is a cancel whose params %s name another ride than its path %s",
				key.ID, key.RequestParams, key.RequestPath)
		}
		return e.CancelRide(ctx, &CancelRideRequest{KeyedRequest: resumed(user, key), RideID: params.RideID})
	}
	return nil, fmt.Errorf("idempotency key %d is of no request this release knows: %s %s", key.ID, key.RequestMethod, key.RequestPath)
}

// resumed is the request that resumes key, as its client would have sent it again.
func resumed(user *models.User, key *models.IdempotencyKey) KeyedRequest {
	return KeyedRequest{User: user, IdempotencyKey: key.IdempotencyKey, OriginIP: key.OriginIP, ResumeOnly: true}
}

// FaultPoint names a moment in a request at which failure tests crash or stall the process.
type FaultPoint string

// The fault points: right after each atomic phase commits (runPhases fires them), and between
// Stripe's answer to a successful charge or refund and the phase that records it (the worst
// moment to die: Stripe acted and we do not know it yet; Executor.answered fires them).
const (
	// FaultPointRideCreated: the first atomic phase committed the key at ride_created, with its
	// ride and audit record; the charge is next.
	FaultPointRideCreated FaultPoint = "ride_created"

	// FaultPointChargeAnswered: Stripe charged, and nothing recorded it yet.
	FaultPointChargeAnswered FaultPoint = "charge_answered"

	// FaultPointFinished: the last atomic phase of a ride or a cancel committed (the charge or
	// refund, the staged receipt and the response); the client has not been answered yet.
	FaultPointFinished FaultPoint = "finished"

	// FaultPointCancelClaimed: a cancel's first atomic phase claimed the ride; the refund is next.
	FaultPointCancelClaimed FaultPoint = "cancel_claimed"

	// FaultPointRefundAnswered: Stripe refunded, and nothing recorded it yet.
	FaultPointRefundAnswered FaultPoint = "refund_answered"
)

// FaultInjector acts at fault points; see internal/faults.
type FaultInjector interface {
	At(ctx context.Context, point FaultPoint)
}

// faultPoint tells the fault injector, if any, that the request is at point.
func (e *Executor) faultPoint(ctx context.Context, point FaultPoint) {
	if e.config.Faults != nil {
		e.config.Faults.At(ctx, point)
	}
}

// testHooks let tests stop a request at a precise point to play a failure out.
type testHooks struct {
	// inPhase runs inside the atomic phase's transaction after each phase's own work, with the
	// recovery point the phase started from.
	inPhase func(ctx context.Context, tx models.DBTX, point models.RecoveryPoint) error
	// afterStripeCall runs once Stripe has answered a charge or a refund, before the answer is
	// committed.
	afterStripeCall func(ctx context.Context)
	// phaseTimeout is told how long an atomic phase may take; unlockTimeout, how long the
	// unlock after a failed run may wait.
	phaseTimeout  func(timeout time.Duration)
	unlockTimeout func(timeout time.Duration)
	// now is the clock that ConflictRetryBudget is measured on, time.Now when nil: a test of the
	// budget counts the tries a budget allows, which on a loaded machine's clock would depend
	// on how long each try happened to take.
	now func() time.Time
}

// now returns the time on the clock of the conflict retry budget.
func (e *Executor) now() time.Time {
	if e.hooks.now != nil {
		return e.hooks.now()
	}
	return time.Now()
}
