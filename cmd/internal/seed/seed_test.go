package seed_test

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/cmd/internal/seed"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/phases/resource"
	"github.com/rocketrides/rocketrides/workers"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		opts    seed.Options
		wantErr string
	}{
		{"RidesAndRiders", seed.Options{Rides: 10, Riders: 3}, ""},
		{"MoreRidersThanRides", seed.Options{Rides: 1, Riders: 3}, ""},
		{"RidersOnly", seed.Options{Rides: 0, Riders: 3}, ""},
		{"Nothing", seed.Options{}, ""},
		{"NegativeRides", seed.Options{Rides: -1, Riders: 3}, "rides must be 0 or more"},
		{"NegativeRiders", seed.Options{Rides: 0, Riders: -1}, "riders must be 0 or more"},
		{"RidesWithoutRiders", seed.Options{Rides: 5, Riders: 0}, "5 rides need at least 1 rider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.opts.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("want no error, got %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("want an error saying %q, got %v", tt.wantErr, err)
			}
		})
	}
}

func TestSeed(t *testing.T) {
	t.Parallel()

	t.Run("RandomIDs", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		start := time.Now()

		mustSeed(t, pool, seed.Options{Rides: 60, Riders: 7}, false)
		checkHistory(t, pool, 60, 7, start)
		for _, table := range []string{"idempotency_keys", "rides", "audit_records"} {
			// 63 random bits: the odds of one id below 2^32 are about one in two billion.
			if n := count(t, pool, "SELECT count(*) FROM "+table+" WHERE id < 4294967296"); n != 0 {
				t.Errorf("%s has %d ids below 2^32: they look sequential, not random", table, n)
			}
		}

		// Seeding again adds to what is there: new riders with emails and customers of their own.
		mustSeed(t, pool, seed.Options{Rides: 10, Riders: 3}, false)
		checkHistory(t, pool, 70, 10, start)
	})

	t.Run("SequentialIDsOnTheArticleSchema", func(t *testing.T) {
		t.Parallel()
		pool := poolMigratedTo(t, 5)
		start := time.Now()

		mustSeed(t, pool, seed.Options{Rides: 20, Riders: 3}, true)
		checkIDs(t, pool, 1, 20)
		// A second seed continues after the ids the first one took.
		mustSeed(t, pool, seed.Options{Rides: 30, Riders: 4}, true)
		checkIDs(t, pool, 1, 50)
		checkHistory(t, pool, 50, 7, start)

		// The sequences moved past the seeded ids: a request's inserts, which take the column
		// defaults, get the next ids rather than colliding.
		ctx := t.Context()
		var userID int64
		if err := pool.QueryRow(ctx, "SELECT min(id) FROM users").Scan(&userID); err != nil {
			t.Fatal(err)
		}
		// The article's schema takes ids from the column defaults, as these inserts do.
		var keyID, rideID, auditID int64
		if err := pool.QueryRow(ctx, `
			INSERT INTO idempotency_keys (idempotency_key, request_method, request_path, request_params,
				origin_ip, recovery_point, stripe_idempotency_key, user_id)
			VALUES ('after-the-seed-0123456789', 'POST', '/rides', '{}', '127.0.0.1', 'started', $1, $2)
			RETURNING id`, phases.StripeIdempotencyKey([]byte("test"), userID, "after-the-seed-0123456789"), userID).Scan(&keyID); err != nil {
			t.Fatalf("error inserting a key after the seed: %v", err)
		}
		if err := pool.QueryRow(ctx, `
			INSERT INTO rides (idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon, user_id)
			VALUES ($1, 0, 0, 0, 0, $2) RETURNING id`, keyID, userID).Scan(&rideID); err != nil {
			t.Fatalf("error inserting a ride after the seed: %v", err)
		}
		if err := pool.QueryRow(ctx, `
			INSERT INTO audit_records (action, data, origin_ip, resource_id, resource_type, user_id)
			VALUES ($1, '{}', '127.0.0.1', $2, 'ride', $3) RETURNING id`,
			models.AuditActionRideCreated, rideID, userID).Scan(&auditID); err != nil {
			t.Fatalf("error inserting an audit record after the seed: %v", err)
		}
		if keyID != 51 || rideID != 51 || auditID != 51 {
			t.Errorf("after the seed, inserts got ids %d, %d, %d; want 51 each", keyID, rideID, auditID)
		}
	})

	t.Run("EveryRiderHasHistory", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		mustSeed(t, pool, seed.Options{Rides: 5, Riders: 5}, false)
		checkHistory(t, pool, 5, 5, time.Now())
	})

	t.Run("RidersWithoutRides", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		mustSeed(t, pool, seed.Options{Rides: 0, Riders: 3}, false)
		checkHistory(t, pool, 0, 3, time.Now())
	})

	t.Run("InvalidOptionsWriteNothing", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		if _, err := seed.Seed(t.Context(), pool, seed.Options{Rides: 5, Riders: 0}); err == nil {
			t.Fatal("want an error for rides without riders")
		}
		if n := count(t, pool, "SELECT count(*) FROM users"); n != 0 {
			t.Errorf("refused options left %d users", n)
		}
	})
}

// mustSeed seeds opts into pool and checks the result.
func mustSeed(t *testing.T, pool *pgxpool.Pool, opts seed.Options, wantSequential bool) {
	t.Helper()
	result, err := seed.Seed(t.Context(), pool, opts)
	if err != nil {
		t.Fatalf("error seeding: %v", err)
	}
	want := seed.Result{Riders: opts.Riders, Rides: opts.Rides, SequentialIDs: wantSequential}
	if *result != want {
		t.Fatalf("result %+v, want %+v", *result, want)
	}
}

// uuidV4 is how client.NewIdempotencyKey writes keys.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkHistory checks that the database holds exactly rides finished rides of riders seeded
// riders, created after seeding began less the two days of history, each as the API, the
// enqueuer and the receipt worker leave one.
func checkHistory(t *testing.T, pool *pgxpool.Pool, rides, riders int, seededFrom time.Time) {
	t.Helper()
	ctx := t.Context()

	for table, want := range map[string]int{"users": riders, "idempotency_keys": rides, "rides": rides, "audit_records": rides} {
		if n := count(t, pool, "SELECT count(*) FROM "+table); n != want {
			t.Errorf("%s holds %d rows, want %d", table, n, want)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM users
		WHERE email ~ '^seed-[a-z2-7]{12}-[0-9]+@rocketrides\.example$' AND stripe_customer_id LIKE 'cus_seed\_%'
			AND octet_length(api_token_hash) = 32`); n != riders {
		t.Errorf("%d of %d users look like seeded riders", n, riders)
	}
	if n := count(t, pool, "SELECT count(DISTINCT user_id) FROM rides"); n != min(rides, riders) {
		t.Errorf("rides belong to %d riders, want %d", n, min(rides, riders))
	}

	rows, err := pool.Query(ctx, `
		SELECT id, created_at, idempotency_key, last_run_at, locked_at, request_method, request_params,
			request_path, origin_ip, response_code, response_body, recovery_point, stripe_idempotency_key,
			charge_attempted_at, last_error, user_id
		FROM idempotency_keys`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*models.IdempotencyKey, error) {
		var k models.IdempotencyKey
		err := row.Scan(&k.ID, &k.CreatedAt, &k.IdempotencyKey, &k.LastRunAt, &k.LockedAt, &k.RequestMethod,
			&k.RequestParams, &k.RequestPath, &k.OriginIP, &k.ResponseCode, &k.ResponseBody, &k.RecoveryPoint,
			&k.StripeIdempotencyKey, &k.ForeignMutationAttemptedAt, &k.LastError, &k.UserID)
		return &k, err
	})
	if err != nil {
		t.Fatal(err)
	}
	earliest, latest := seededFrom.Add(-48*time.Hour-time.Second), time.Now()
	for _, key := range keys {
		if key.RecoveryPoint != models.RecoveryPointFinished || key.LockedAt != nil || key.LastError != nil ||
			key.ResponseCode == nil || *key.ResponseCode != 201 || key.RequestMethod != "POST" || key.RequestPath != "/rides" ||
			!key.LastRunAt.Equal(key.CreatedAt) || key.ForeignMutationAttemptedAt == nil || !key.ForeignMutationAttemptedAt.Equal(key.CreatedAt) ||
			key.CreatedAt.Before(earliest) || key.CreatedAt.After(latest) ||
			!uuidV4.MatchString(key.IdempotencyKey) || !strings.HasPrefix(key.StripeIdempotencyKey, "rocket-rides-") {
			t.Errorf("key %d is not a finished POST /rides of the last two days: %+v", key.ID, key)
			continue
		}

		// Read by the article's columns, which every schema the seed runs on has (models reads
		// the latest schema's).
		ride := &models.Ride{}
		err := pool.QueryRow(ctx, `SELECT id, created_at, user_id, stripe_charge_id, origin_lat, origin_lon, target_lat, target_lon
			FROM rides WHERE idempotency_key_id = $1`, key.ID).Scan(&ride.ID, &ride.CreatedAt, &ride.UserID,
			&ride.StripeChargeID, &ride.OriginLat, &ride.OriginLon, &ride.TargetLat, &ride.TargetLon)
		if err != nil {
			t.Errorf("key %d has no ride: %v", key.ID, err)
			continue
		}
		if !ride.CreatedAt.Equal(key.CreatedAt) || ride.UserID != key.UserID ||
			ride.StripeChargeID == nil || !strings.HasPrefix(*ride.StripeChargeID, "ch_seed_") {
			t.Errorf("ride %d of key %d does not match it, or has no charge: %+v", ride.ID, key.ID, ride)
			continue
		}

		var params phases.RideParams
		if err := json.Unmarshal(key.RequestParams, &params); err != nil {
			t.Fatal(err)
		}
		if params != (phases.RideParams{OriginLat: ride.OriginLat, OriginLon: ride.OriginLon, TargetLat: ride.TargetLat, TargetLon: ride.TargetLon}) {
			t.Errorf("key %d asked for %+v, but its ride is %+v", key.ID, params, ride)
		}

		// The stored response is what the API stores for this ride as read back, and names
		// the ride by its id as a string, as the API renders ids.
		var stored struct {
			Ride struct {
				ID             string `json:"id"`
				StripeChargeID string `json:"stripe_charge_id"`
			} `json:"ride"`
		}
		if err := json.Unmarshal(key.ResponseBody, &stored); err != nil {
			t.Fatal(err)
		}
		if stored.Ride.ID != strconv.FormatInt(ride.ID, 10) || stored.Ride.StripeChargeID != *ride.StripeChargeID {
			t.Errorf("key %d's response names ride %q charged %q, want %d charged %s",
				key.ID, stored.Ride.ID, stored.Ride.StripeChargeID, ride.ID, *ride.StripeChargeID)
		}
		// As the ride stood at its 201: the receipt came after it.
		atBooking := *ride
		atBooking.ReceiptSentAt = nil
		wantBody, err := json.Marshal(resource.NewRideCreated(&atBooking))
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, key.ResponseBody, wantBody) {
			t.Errorf("key %d's response is\n%s\nwant\n%s", key.ID, key.ResponseBody, wantBody)
		}

		receipt, err := models.RideReceiptGet(ctx, pool, ride.ID)
		if err != nil {
			t.Errorf("ride %d has no receipt recorded: %v", ride.ID, err)
			continue
		}
		if receipt.MessageID != workers.ReceiptMessageID(ride, "rocketrides.example") || receipt.SentAt.Before(ride.CreatedAt) {
			t.Errorf("ride %d created at %s has receipt %+v", ride.ID, ride.CreatedAt, receipt)
		}
	}

	if n := count(t, pool, `SELECT count(*) FROM rides r
		WHERE (SELECT count(*) FROM audit_records a WHERE a.resource_type = 'ride' AND a.resource_id = r.id) = 1`); n != rides {
		t.Errorf("%d of %d rides have exactly one audit record", n, rides)
	}
	if n := count(t, pool, `SELECT count(*) FROM audit_records a
		JOIN rides r ON a.resource_type = 'ride' AND a.resource_id = r.id
		JOIN idempotency_keys k ON k.id = r.idempotency_key_id
		WHERE a.action = 'ride.created' AND a.user_id = r.user_id AND a.created_at = r.created_at
			AND a.data = k.request_params AND a.origin_ip = k.origin_ip`); n != rides {
		t.Errorf("%d of %d audit records record their ride's creation with its request's params and origin", n, rides)
	}
}

// checkIDs checks that keys, rides and audit records have exactly the ids from first to last.
func checkIDs(t *testing.T, pool *pgxpool.Pool, first, last int64) {
	t.Helper()
	for _, table := range []string{"idempotency_keys", "rides", "audit_records"} {
		var low, high, n int64
		err := pool.QueryRow(t.Context(), "SELECT min(id), max(id), count(*) FROM "+table).Scan(&low, &high, &n)
		if err != nil {
			t.Fatal(err)
		}
		if low != first || high != last || n != last-first+1 {
			t.Errorf("%s ids run from %d to %d (%d rows), want %d to %d", table, low, high, n, first, last)
		}
	}
}

// poolMigratedTo returns a pool on a fresh database migrated up to version and no further.
func poolMigratedTo(t *testing.T, version int64) *pgxpool.Pool {
	t.Helper()
	url := dbtest.NewEmptyDB(t)
	db, err := migrations.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(t.Context(), version); err != nil {
		t.Fatalf("error migrating up to %d: %v", version, err)
	}
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("error counting with %q: %v", sql, err)
	}
	return n
}

// sameJSON reports whether a and b are the same JSON value, whatever their layout: Postgres
// hands jsonb back in a layout of its own.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var av, bv any
	if err := json.Unmarshal(a, &av); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &bv); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(av, bv)
}
