package phases

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rocketrides/rocketrides/internal/tracing"
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
			RequestMethod:        methodPost,
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
	tracing.LinkEarlierAttempt(ctx, existing.TraceParent)

	// A key names one request: the same key on another route (a booking's key sent with a
	// cancel, say) is as much a mismatch as other parameters on the same route.
	if existing.RequestMethod != methodPost || existing.RequestPath != req.path {
		return false, ErrParamsMismatch
	}
	if same, err := req.sameParams(existing.RequestParams); err != nil || !same {
		return false, cmp.Or(err, ErrParamsMismatch)
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

// StripeIdempotencyKey is the key a request's charge is sent to Stripe with: an HMAC-SHA256,
// under the database's own secret (models.StripeKeySecretGet), of the rider's id and the
// client's Idempotency-Key.
//
// Derived, not drawn at random, so that a retry sends Stripe the same key even when the
// database has forgotten the request: a restore from a backup taken after the first atomic
// phase committed but before the charge was recorded, or a failover to a standby that never
// received that commit. The retry then creates the key's row anew, Stripe replays the first
// charge instead of making a second, and the ride records the charge the rider already paid.
// A random key would be new after the loss, and Stripe would charge twice.
//
// It never repeats across databases, although rider ids and client keys do: each database
// draws its own secret, and a backup carries its database's. It never passes on the client's
// key as it is, since Stripe scopes keys to our account, where two riders' keys could collide.
//
// The same rider may use the same client key again only after the reaper has deleted the
// first (models.IdempotencyKeyRetention, 72 h), long after Stripe has forgotten the Stripe key (24 h,
// StripeKeyMemory), so a reused key is charged afresh, as a new request should be.
func StripeIdempotencyKey(secret []byte, userID int64, clientKey string) string {
	mac := hmac.New(sha256.New, secret)
	// The id has a fixed width, so no (id, key) pair encodes like another.
	mac.Write(binary.BigEndian.AppendUint64(nil, uint64(userID)))
	mac.Write([]byte(clientKey))
	return stripeIdempotencyKeyPrefix + hex.EncodeToString(mac.Sum(nil))
}

// stripeIdempotencyKeyPrefix marks our keys in Stripe's dashboard and logs.
const stripeIdempotencyKeyPrefix = "rocket-rides-"

// stripeIdempotencyKey derives the Stripe key of a new request, reading the database's secret
// through db the first time. The secret never changes for the life of a database, so one read
// per process is enough.
func (e *Executor) stripeIdempotencyKey(ctx context.Context, db models.DBTX, userID int64, clientKey string) (string, error) {
	secret := e.stripeKeySecret.Load()
	if secret == nil {
		read, err := models.StripeKeySecretGet(ctx, db)
		if err != nil {
			return "", err
		}
		e.stripeKeySecret.Store(&read)
		secret = &read
	}
	return StripeIdempotencyKey(*secret, userID, clientKey), nil
}
