package phases

import (
	"context"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

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
