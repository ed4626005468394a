package phases

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/models"
)

// upsertIdempotencyKey is tx1, the first atomic phase: it finds or creates the key, and takes
// its lock for this request. It returns replayed=true for a key that had already finished,
// whose stored response is then simply handed back.
//
// Two first requests with one key cannot both insert it: the unique index on (user_id,
// idempotency_key) stops one, and under SERIALIZABLE that one sees a serialization failure
// (40001) rather than a unique violation. Its retry finds the winner's key, locked, and answers
// ErrKeyInUse, or replays the response if the winner finished meanwhile.
func (e *Executor) upsertIdempotencyKey(ctx context.Context, req *CreateRideRequest) (key *models.IdempotencyKey, replayed bool, err error) {
	params, err := json.Marshal(req.Params)
	if err != nil {
		return nil, false, fmt.Errorf("error encoding request params: %w", err)
	}

	err = e.inSerializableTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		existing, err := models.IdempotencyKeyGetForUpdate(ctx, tx, req.User.ID, req.IdempotencyKey)
		if errors.Is(err, models.ErrNotFound) && req.ResumeOnly {
			return ErrKeyNotFound
		}
		if errors.Is(err, models.ErrNotFound) {
			key, err = models.IdempotencyKeyInsert(ctx, tx, models.IdempotencyKeyInsertParams{
				IdempotencyKey:       req.IdempotencyKey,
				RequestMethod:        requestMethod,
				RequestParams:        params,
				RequestPath:          requestPath,
				OriginIP:             req.OriginIP,
				StripeIdempotencyKey: NewStripeIdempotencyKey(),
				UserID:               req.User.ID,
			})
			replayed = false
			return err
		}
		if err != nil {
			return err
		}

		same, err := sameParams(existing.RequestParams, req.Params)
		if err != nil {
			return err
		}
		if !same {
			return ErrParamsMismatch
		}

		if existing.RecoveryPoint == models.RecoveryPointFinished {
			key, replayed = existing, true
			return nil
		}

		key, err = models.IdempotencyKeyLock(ctx, tx, existing.ID, e.config.LockTimeout)
		if errors.Is(err, models.ErrNotFound) {
			return ErrKeyInUse
		}
		replayed = false
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return key, replayed, nil
}

// NewStripeIdempotencyKey makes the key our charge is sent to Stripe with. We never pass on
// the client's key: Stripe scopes keys to our account, not to our users, so two riders' keys
// could collide. And it is random rather than derived from the row id, because ids repeat
// across databases (a restored backup, a second region) and Stripe would then replay another
// ride's charge. 128 random bits make a collision as good as impossible.
func NewStripeIdempotencyKey() string {
	return "rocket-rides-" + rand.Text()
}
