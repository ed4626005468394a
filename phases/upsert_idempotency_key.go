package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rocketrides/rocketrides/models"
)

// upsertIdempotencyKey opens the first atomic phase of a request: it finds the key, or makes a
// new one in memory for the atomic phase to insert as it commits, and takes its lock for this
// request. It sets r.replayed for a key that had already finished, whose stored response is
// then simply handed back, and reports whether the key is new.
//
// Two first requests with one key cannot both insert it: the unique index on (user_id,
// idempotency_key) stops one, and under SERIALIZABLE that one sees a serialization failure
// (40001) rather than a unique violation. Its retry finds the winner's key, locked, and answers
// ErrKeyInUse, or replays the response if the winner finished meanwhile.
func (e *Executor) upsertIdempotencyKey(ctx context.Context, tx *phaseTx, r *run) (newKey bool, err error) {
	req := r.req
	existing, err := models.IdempotencyKeyGetForUpdate(ctx, tx, req.User.ID, req.IdempotencyKey)
	if errors.Is(err, models.ErrNotFound) {
		if req.ResumeOnly {
			return false, ErrKeyNotFound
		}
		if req.AdmitNewKey != nil {
			if err := req.AdmitNewKey(); err != nil {
				return false, err
			}
		}
		params, err := json.Marshal(req.params)
		if err != nil {
			return false, fmt.Errorf("error encoding request params: %w", err)
		}
		stripeKey, err := e.stripeIdempotencyKey(ctx, tx, req.User.ID, req.IdempotencyKey)
		if err != nil {
			return false, err
		}
		r.key = &models.IdempotencyKey{
			ID:                   models.NewID(),
			IdempotencyKey:       req.IdempotencyKey,
			RequestMethod:        req.method,
			RequestParams:        params,
			RequestPath:          req.path,
			OriginIP:             req.OriginIP,
			RecoveryPoint:        models.RecoveryPointStarted,
			StripeIdempotencyKey: stripeKey,
			UserID:               req.User.ID,
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}

	// A key names one request: the same key on another route (a booking's key sent with a
	// cancel, say) is as much a mismatch as other parameters on the same route.
	if existing.RequestMethod != req.method || existing.RequestPath != req.path {
		return false, ErrParamsMismatch
	}
	same, err := req.sameParams(existing.RequestParams)
	if err != nil {
		return false, err
	}
	if !same {
		return false, ErrParamsMismatch
	}

	if existing.RecoveryPoint == models.RecoveryPointFinished {
		r.key, r.replayed = existing, true
		return false, nil
	}

	r.key, err = models.IdempotencyKeyLock(ctx, tx, existing.UserID, existing.ID, e.config.LockLease)
	if errors.Is(err, models.ErrNotFound) {
		return false, ErrKeyInUse
	}
	if err != nil {
		return false, err
	}
	r.lockGeneration = r.key.LockGeneration
	return false, nil
}

// newKeyParams are the columns of a new key, as its first atomic phase leaves it.
func newKeyParams(key *models.IdempotencyKey, progress models.IdempotencyKeyProgress) models.IdempotencyKeyInsertParams {
	return models.IdempotencyKeyInsertParams{
		ID:                   key.ID,
		IdempotencyKey:       key.IdempotencyKey,
		RequestMethod:        key.RequestMethod,
		RequestParams:        key.RequestParams,
		RequestPath:          key.RequestPath,
		OriginIP:             key.OriginIP,
		StripeIdempotencyKey: key.StripeIdempotencyKey,
		UserID:               key.UserID,
		Progress:             progress,
	}
}
