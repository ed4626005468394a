package phases

import (
	"errors"

	"github.com/rocketrides/rocketrides/models"
)

// Errors a caller branches on. None of them is stored on the key: each leaves the request
// where it was, to be retried (or, for ErrParamsMismatch, corrected) by the client.
var (
	// ErrParamsMismatch: the key was first used with other parameters, which is a client bug.
	ErrParamsMismatch = errors.New("idempotency key was used with different parameters")

	// ErrKeyNotFound: a ResumeOnly request found no key to resume.
	ErrKeyNotFound = errors.New("idempotency key not found")

	// ErrKeyInUse: another request holds the key's lock right now.
	ErrKeyInUse = errors.New("idempotency key is in use by another request")

	// ErrLockLost: this request ran past its lease and another request took the key over (or
	// the reaper deleted it): the fenced write of its atomic phase matched nothing, so the phase
	// committed nothing, and the other request carries on.
	ErrLockLost = models.ErrLockLost

	// ErrConflict: an atomic phase kept failing on serialization conflicts or deadlocks with
	// concurrent transactions for all of Config.ConflictRetryBudget. Nothing of that phase
	// was committed, and a retry of the request resumes.
	ErrConflict = errors.New("phase kept conflicting with concurrent transactions")

	// ErrCommitOutcomeUnknown: the connection failed while an atomic phase was committing (the
	// database went away, or failed over to its standby), so whether the phase committed is
	// unknown. The request stops; its retry finds out, resuming from whichever recovery point
	// the key holds.
	ErrCommitOutcomeUnknown = errors.New("the database did not confirm the commit")

	// ErrSimulated is the failure the raise_error parameter asks for.
	ErrSimulated = errors.New("simulated error after ride_created (raise_error)")

	// ErrSimulationDisabled: raise_error was sent to a server that does not simulate errors.
	ErrSimulationDisabled = errors.New("raise_error is only accepted when SIMULATE_ERRORS is on")
)
