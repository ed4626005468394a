package seed

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/phases/resource"
	"github.com/rocketrides/rocketrides/workers"
)

// The request every seeded key records, as the phases store a POST /rides.
const (
	requestMethod = "POST"
	requestPath   = "/rides"
)

// receiptLag is how long after its request a ride's receipt is recorded: the staged job's
// NOTIFY wakes the enqueuer at once and the worker mails straight away, so about a second.
const receiptLag = time.Second

// messageIDDomain is the domain of receipts' Message-IDs under the default MAIL_FROM,
// receipts@rocketrides.example.
const messageIDDomain = "rocketrides.example"

// ridesPerBatch bounds the memory a seed takes, whatever the number of rides: the rows of one
// batch are built and then copied, a few megabytes at a time. The cost of a COPY statement is
// nothing beside 10,000 rows.
const ridesPerBatch = 10_000

// coordinateDecimals is the precision of seeded coordinates, a GPS fix's. It also keeps every
// coordinate exact in rides' numeric(13, 10) columns, so that the ride read back is the ride
// the stored response shows.
const coordinateDecimals = 6

// seedStripeKeySecret derives the seeded keys' Stripe keys, shaped as the API's are. Random for
// each run, so that no seeded key can be a live database's: seeded charges are no Stripe
// account's either.
var seedStripeKeySecret = []byte(cryptorand.Text())

// history is one finished ride and the rows around it.
type history struct {
	key     models.IdempotencyKey
	ride    models.Ride
	receipt models.RideReceipt
	audit   models.AuditRecord
}

// insertRides writes n finished rides of the riders userIDs, created between start and end.
func insertRides(ctx context.Context, tx pgx.Tx, n int, userIDs []int64, ids *idSource, start, end time.Time) error {
	batch := make([]history, 0, min(n, ridesPerBatch))
	for seeded := 0; seeded < n; seeded += len(batch) {
		batch = batch[:0]
		for i := seeded; i < min(n, seeded+ridesPerBatch); i++ {
			h, err := newHistory(ids, riderOf(i, userIDs), start, end)
			if err != nil {
				return err
			}
			batch = append(batch, *h)
		}
		if err := copyHistory(ctx, tx, batch); err != nil {
			return err
		}
	}
	return nil
}

// riderOf picks the rider of the i-th ride: the first rides go one to each rider, so that every
// rider has history, and the rest to riders at random.
func riderOf(i int, userIDs []int64) int64 {
	if i < len(userIDs) {
		return userIDs[i]
	}
	return userIDs[rand.IntN(len(userIDs))]
}

// newHistory makes the rows of one ride of userID, at a random time between start and end.
func newHistory(ids *idSource, userID int64, start, end time.Time) (*history, error) {
	// Postgres keeps microseconds; the stored response must show the time that is read back.
	createdAt := start.Add(rand.N(end.Sub(start))).Truncate(time.Microsecond)
	params := phases.RideParams{
		OriginLat: randomCoordinate(90),
		OriginLon: randomCoordinate(180),
		TargetLat: randomCoordinate(90),
		TargetLon: randomCoordinate(180),
	}
	paramsJSON, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("error encoding ride params: %w", err)
	}
	idempotencyKey, err := client.NewIdempotencyKey()
	if err != nil {
		return nil, err
	}
	// seed_ marks charges that no Stripe account holds.
	chargeID := "ch_seed_" + cryptorand.Text()
	// Documentation addresses (RFC 5737): as varied as riders' are, and nobody's.
	originIP := netip.AddrFrom4([4]byte{203, 0, 113, byte(rand.IntN(256))})

	keyID := ids.keys.next()
	ride := models.Ride{
		ID:               ids.rides.next(),
		CreatedAt:        createdAt,
		IdempotencyKeyID: &keyID,
		OriginLat:        params.OriginLat,
		OriginLon:        params.OriginLon,
		TargetLat:        params.TargetLat,
		TargetLon:        params.TargetLon,
		StripeChargeID:   &chargeID,
		UserID:           userID,
	}
	body, err := json.Marshal(resource.NewRideCreated(&ride))
	if err != nil {
		return nil, fmt.Errorf("error encoding response: %w", err)
	}
	responseCode := http.StatusCreated

	return &history{
		key: models.IdempotencyKey{
			ID:                         keyID,
			CreatedAt:                  createdAt,
			IdempotencyKey:             idempotencyKey,
			LastRunAt:                  createdAt,
			LockedAt:                   nil, // finished keys are unlocked
			RequestMethod:              requestMethod,
			RequestParams:              paramsJSON,
			RequestPath:                requestPath,
			OriginIP:                   originIP,
			ResponseCode:               &responseCode,
			ResponseBody:               body,
			RecoveryPoint:              models.RecoveryPointFinished,
			StripeIdempotencyKey:       phases.StripeIdempotencyKey(seedStripeKeySecret, userID, idempotencyKey),
			ForeignMutationAttemptedAt: &createdAt,
			UserID:                     userID,
		},
		ride: ride,
		receipt: models.RideReceipt{
			RideID:    ride.ID,
			MessageID: workers.ReceiptMessageID(&ride, messageIDDomain),
			SentAt:    createdAt.Add(receiptLag),
		},
		audit: models.AuditRecord{
			ID:           ids.audits.next(),
			Action:       models.AuditActionRideCreated,
			CreatedAt:    createdAt,
			Data:         paramsJSON,
			OriginIP:     originIP,
			ResourceID:   ride.ID,
			ResourceType: "ride",
			UserID:       userID,
		},
	}, nil
}

// randomCoordinate returns a coordinate between -limit and limit.
func randomCoordinate(limit float64) float64 {
	scale := math.Pow10(coordinateDecimals)
	return math.Round((rand.Float64()*2-1)*limit*scale) / scale
}

// copyHistory copies a batch into the three tables, keys first: rides point at them.
func copyHistory(ctx context.Context, tx pgx.Tx, batch []history) error {
	// locked_at is written although NULL: before migration 00007 its default was now(), a
	// locked key, and the article's schema (version 5), which the benchmark seeds, still has it.
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"idempotency_keys"},
		[]string{"id", "created_at", "idempotency_key", "last_run_at", "locked_at", "request_method",
			"request_params", "request_path", "origin_ip", "response_code", "response_body",
			"recovery_point", "stripe_idempotency_key", "charge_attempted_at", "user_id"},
		pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
			k := &batch[i].key
			return []any{k.ID, k.CreatedAt, k.IdempotencyKey, k.LastRunAt, k.LockedAt, k.RequestMethod,
				k.RequestParams, k.RequestPath, k.OriginIP, k.ResponseCode, k.ResponseBody,
				string(k.RecoveryPoint), k.StripeIdempotencyKey, k.ForeignMutationAttemptedAt, k.UserID}, nil
		}))
	if err != nil {
		return fmt.Errorf("error copying idempotency keys: %w", err)
	}

	_, err = tx.CopyFrom(ctx, pgx.Identifier{"rides"},
		[]string{"id", "created_at", "idempotency_key_id", "origin_lat", "origin_lon", "target_lat",
			"target_lon", "stripe_charge_id", "user_id", "receipt_sent_at", "receipt_message_id"},
		pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
			r, receipt := &batch[i].ride, &batch[i].receipt
			return []any{r.ID, r.CreatedAt, r.IdempotencyKeyID, r.OriginLat, r.OriginLon, r.TargetLat,
				r.TargetLon, r.StripeChargeID, r.UserID, receipt.SentAt, receipt.MessageID}, nil
		}))
	if err != nil {
		return fmt.Errorf("error copying rides: %w", err)
	}

	_, err = tx.CopyFrom(ctx, pgx.Identifier{"audit_records"},
		[]string{"id", "action", "created_at", "data", "origin_ip", "resource_id", "resource_type", "user_id"},
		pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
			a := &batch[i].audit
			return []any{a.ID, a.Action, a.CreatedAt, a.Data, a.OriginIP, a.ResourceID, a.ResourceType, a.UserID}, nil
		}))
	if err != nil {
		return fmt.Errorf("error copying audit records: %w", err)
	}
	return nil
}
