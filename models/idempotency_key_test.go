package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/models"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// insertKey runs IdempotencyKeyInsert for a new key of a new rider, at progress. It returns the
// key as made in memory and as written.
func insertKey(t *testing.T, pool *pgxpool.Pool, progress models.IdempotencyKeyProgress, lease time.Duration) (*models.IdempotencyKey, *models.IdempotencyKey) {
	t.Helper()
	ctx := context.Background()
	user, err := models.UserInsert(ctx, pool, models.UserInsertParams{
		Email: "rider@example.com", StripeCustomerID: "cus_123", APITokenHash: make([]byte, 32), // a SHA-256, as the CHECK wants
	})
	if err != nil {
		t.Fatal(err)
	}
	params := &models.IdempotencyKey{
		ID:                   models.NewID(),
		IdempotencyKey:       "client-key-0123456789",
		RequestMethod:        "POST",
		RequestParams:        json.RawMessage(`{"origin_lat": 0}`),
		RequestPath:          "/rides",
		OriginIP:             netip.MustParseAddr("192.0.2.7"),
		StripeIdempotencyKey: "rocket-rides-0123456789",
		UserID:               user.ID,
	}
	var key models.IdempotencyKey
	batch := &pgx.Batch{}
	models.IdempotencyKeyInsert(batch, params, progress, lease, &key)
	if err := pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	requireWrittenAsStored(t, pool, &key)
	return params, &key
}

// requireWrittenAsStored fails the test unless written, a key as a write returned it, is the
// key as stored, column for column: a write reads back only the columns the database decides,
// and makes up the rest from what its writer knew.
func requireWrittenAsStored(t *testing.T, pool *pgxpool.Pool, written *models.IdempotencyKey) {
	t.Helper()
	stored, err := models.IdempotencyKeyGetByIDForUpdate(context.Background(), pool, written.UserID, written.ID)
	if err != nil {
		t.Fatal(err)
	}
	var writtenParams, storedParams any
	if err := json.Unmarshal(written.RequestParams, &writtenParams); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(stored.RequestParams, &storedParams); err != nil {
		t.Fatal(err)
	}
	// The params as the writer marshalled them, the response in jsonb's layout, as replays get it.
	if !reflect.DeepEqual(writtenParams, storedParams) || string(written.ResponseBody) != string(stored.ResponseBody) {
		t.Fatalf("want the written key's params %s and response %s as stored, %s and %s",
			written.RequestParams, written.ResponseBody, stored.RequestParams, stored.ResponseBody)
	}
	w, s := *written, *stored
	w.RequestParams, s.RequestParams = nil, nil
	if !reflect.DeepEqual(w, s) {
		t.Fatalf("want the key as written to be the key as stored:\nwritten %+v\nstored  %+v", w, s)
	}
}

// TestIdempotencyKeyInsert checks that each column of a new key receives its own value: the
// insert's fifteen parameters are numbered by hand.
func TestIdempotencyKeyInsert(t *testing.T) {
	t.Parallel()

	const lease = 90 * time.Second
	code := 201

	t.Run("UnfinishedIsLockedForTheLease", func(t *testing.T) {
		t.Parallel()
		params, key := insertKey(t, dbtest.NewPool(t), models.IdempotencyKeyProgress{
			RecoveryPoint: models.RecoveryPointRideCreated, ForeignMutationAttempted: true,
		}, lease)

		if key.ID != params.ID || key.UserID != params.UserID || key.IdempotencyKey != params.IdempotencyKey ||
			key.RequestMethod != params.RequestMethod || string(key.RequestParams) != string(params.RequestParams) ||
			key.RequestPath != params.RequestPath || key.OriginIP != params.OriginIP ||
			key.StripeIdempotencyKey != params.StripeIdempotencyKey || key.RecoveryPoint != models.RecoveryPointRideCreated {
			t.Fatalf("want the key's columns as inserted, %+v, got %+v", params, key)
		}
		if key.LockGeneration != models.LockGenerationFirst {
			t.Fatalf("want lock generation %d, got %d", models.LockGenerationFirst, key.LockGeneration)
		}
		// One transaction, one now(): the lease and the charge attempt count from the lock.
		if key.LockedAt == nil || key.LockedUntil == nil || key.LockedUntil.Sub(*key.LockedAt) != lease {
			t.Fatalf("want the key locked for %s, got locked at %v until %v", lease, key.LockedAt, key.LockedUntil)
		}
		if key.ForeignMutationAttemptedAt == nil || !key.ForeignMutationAttemptedAt.Equal(*key.LockedAt) {
			t.Fatalf("want the foreign mutation attempted at the lock's time %v, got %v", key.LockedAt, key.ForeignMutationAttemptedAt)
		}
		if key.ResponseCode != nil || key.ResponseBody != nil {
			t.Fatalf("want no stored response, got %v %s", key.ResponseCode, key.ResponseBody)
		}
	})

	t.Run("FinishedIsUnlocked", func(t *testing.T) {
		t.Parallel()
		_, key := insertKey(t, dbtest.NewPool(t), models.IdempotencyKeyProgress{
			RecoveryPoint: models.RecoveryPointFinished, ResponseCode: &code, ResponseBody: json.RawMessage(`{"id": 1}`),
		}, lease)

		if key.LockedAt != nil || key.LockedUntil != nil || key.ForeignMutationAttemptedAt != nil {
			t.Fatalf("want the key unlocked and no foreign mutation attempted, got locked at %v until %v, attempted at %v",
				key.LockedAt, key.LockedUntil, key.ForeignMutationAttemptedAt)
		}
		var body map[string]int
		if key.ResponseCode == nil || *key.ResponseCode != code || json.Unmarshal(key.ResponseBody, &body) != nil || body["id"] != 1 {
			t.Fatalf("want the response 201 {\"id\": 1} stored, got %v %s", key.ResponseCode, key.ResponseBody)
		}
	})
}

// TestIdempotencyKeyRecordProgress checks the fenced write of an atomic phase's progress.
func TestIdempotencyKeyRecordProgress(t *testing.T) {
	t.Parallel()

	const lease = 90 * time.Second
	record := func(t *testing.T, pool *pgxpool.Pool, key *models.IdempotencyKey, generation int64, progress models.IdempotencyKeyProgress) (*models.IdempotencyKey, error) {
		t.Helper()
		var written models.IdempotencyKey
		batch := &pgx.Batch{}
		models.IdempotencyKeyRecordProgress(batch, key, generation, lease, progress, &written)
		err := pool.SendBatch(context.Background(), batch).Close()
		if err == nil {
			requireWrittenAsStored(t, pool, &written)
		}
		return &written, err
	}

	t.Run("KeepsTheFirstAttemptAndFinishes", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		_, key := insertKey(t, pool, models.IdempotencyKeyProgress{
			RecoveryPoint: models.RecoveryPointRideCreated, ForeignMutationAttempted: true,
		}, lease)

		again, err := record(t, pool, key, key.LockGeneration, models.IdempotencyKeyProgress{
			RecoveryPoint: models.RecoveryPointRideCreated, ForeignMutationAttempted: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if again.ForeignMutationAttemptedAt == nil || !again.ForeignMutationAttemptedAt.Equal(*key.ForeignMutationAttemptedAt) ||
			again.LockedUntil == nil || !again.LockedUntil.After(*key.LockedUntil) {
			t.Fatalf("want the first attempt %v kept and the lease renewed past %v, got %v and %v",
				key.ForeignMutationAttemptedAt, key.LockedUntil, again.ForeignMutationAttemptedAt, again.LockedUntil)
		}

		code := 201
		finished, err := record(t, pool, key, key.LockGeneration, models.IdempotencyKeyProgress{
			RecoveryPoint: models.RecoveryPointFinished, ResponseCode: &code, ResponseBody: json.RawMessage(`{}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		if finished.RecoveryPoint != models.RecoveryPointFinished || finished.LockedAt != nil || finished.LockedUntil != nil ||
			finished.ResponseCode == nil || *finished.ResponseCode != code {
			t.Fatalf("want the key finished with 201 and unlocked, got %s %v locked at %v until %v",
				finished.RecoveryPoint, finished.ResponseCode, finished.LockedAt, finished.LockedUntil)
		}
	})

	t.Run("AnotherGenerationIsLockLost", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		_, key := insertKey(t, pool, models.IdempotencyKeyProgress{RecoveryPoint: models.RecoveryPointRideCreated}, lease)

		_, err := record(t, pool, key, key.LockGeneration+1, models.IdempotencyKeyProgress{RecoveryPoint: models.RecoveryPointChargeCreated})
		if !errors.Is(err, models.ErrLockLost) {
			t.Fatalf("want ErrLockLost, got %v", err)
		}
		if point, _, err := models.IdempotencyKeyOutcome(context.Background(), pool, key.UserID, key.ID); err != nil || point != models.RecoveryPointRideCreated {
			t.Fatalf("want the key left at ride_created, got %s (%v)", point, err)
		}
	})
}
