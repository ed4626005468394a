package phases

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/rocketrides/rocketrides/models"
)

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
