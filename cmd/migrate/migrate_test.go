package main

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/migrations"
	"github.com/rocketrides/rocketrides/models"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	migrate := proctest.Build(t, "migrate")
	env := []string{"DATABASE_URL=" + dbtest.NewEmptyDB(t)}

	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := proctest.Run(t, migrate, env, args...)
		if code != 0 {
			t.Fatalf("migrate %v exited %d: %s%s", args, code, out, errOut)
		}
		return out
	}

	if out := run("status"); !strings.Contains(out, "pending") {
		t.Fatalf("want pending migrations on an empty database, got:\n%s", out)
	}
	run("up")
	run("up") // a second run is a no-op
	if out := run("status"); strings.Contains(out, "pending") {
		t.Fatalf("want nothing pending after up, got:\n%s", out)
	}
	run("down")
	if out := run("status"); !strings.Contains(out, "pending") {
		t.Fatalf("want one migration pending after down, got:\n%s", out)
	}
	run("up")

	for _, args := range [][]string{nil, {"sideways"}} {
		if _, errOut, code := proctest.Run(t, migrate, env, args...); code == 0 || !strings.Contains(errOut, "usage") {
			t.Fatalf("migrate %v: want usage and a non-zero exit, got %d: %s", args, code, errOut)
		}
	}
	if _, errOut, code := proctest.Run(t, migrate, nil, "up"); code == 0 || !strings.Contains(errOut, "DATABASE_URL") {
		t.Fatalf("want a missing DATABASE_URL named, got %d: %s", code, errOut)
	}
}

// TestUpBringsRiverUpToDate: goose installs River's schema once, as migration 2; the migrations of a
// later River, which goose does not know of, are applied by `migrate up` too, as every process
// that finds River's schema behind tells the operator to run it.
func TestUpBringsRiverUpToDate(t *testing.T) {
	t.Parallel()
	migrate := proctest.Build(t, "migrate")
	url := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + url}

	version := dbtest.RiverBehind(t, url)
	out, errOut, code := proctest.Run(t, migrate, env, "up")
	if want := fmt.Sprintf("OK    up River migration %d\n", version); code != 0 || out != want {
		t.Fatalf("want exactly %q, got %d %q %s", want, code, out, errOut)
	}
	out, errOut, code = proctest.Run(t, migrate, env, "up")
	if code != 0 || !strings.HasPrefix(out, "nothing to apply") {
		t.Fatalf("want nothing left to apply, got %d %q %s", code, out, errOut)
	}
}

// TestUpGivesUpOnALockHeldByALongTransaction: a transaction that keeps the rides table open holds
// up migration 13's ALTER TABLE. Each attempt waits migrations.LockTimeout and gives up, so that a
// ride inserted meanwhile, queued behind the ALTER, goes through; after its attempts `migrate
// up` fails naming the transaction that held it up. Once that transaction ends, it succeeds.
func TestUpGivesUpOnALockHeldByALongTransaction(t *testing.T) {
	t.Parallel()
	migrate := proctest.Build(t, "migrate")
	url := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + url}
	ctx := t.Context()

	db, err := migrations.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.DownTo(ctx, 12); err != nil {
		t.Fatalf("error rolling back to migration 12: %v", err)
	}

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	hash := sha256.Sum256([]byte("lock-timeout-rider"))
	rider, err := models.UserInsert(ctx, pool, models.UserInsertParams{
		Email: "lock-timeout@example.com", StripeCustomerID: "cus_lock", APITokenHash: hash[:],
	})
	if err != nil {
		t.Fatal(err)
	}

	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	var holderPID int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	const holdingQuery = "SELECT count(*) FROM rides"
	if _, err := tx.Exec(ctx, holdingQuery); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out, errOut string
		code        int
	}
	migrated := make(chan result, 1)
	go func() {
		out, errOut, code := proctest.Run(t, migrate, env, "up")
		migrated <- result{out, errOut, code}
	}()

	// Once the ALTER waits for its lock, a ride insert queues behind it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE rides%')`,
			migrations.ApplicationName).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("migrate up's ALTER TABLE never waited for the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	inserted := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, `INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, user_id)
			VALUES (37.7749, -122.4194, 37.8044, -122.2712, $1)`, rider.ID)
		inserted <- err
	}()
	select {
	case err := <-inserted:
		if err != nil {
			t.Fatalf("error inserting a ride while the migration waited: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("want a ride inserted while the migration waits for its lock, still blocked after 30 s")
	}

	res := <-migrated
	if res.code == 0 {
		t.Fatalf("want migrate up to fail while the transaction holds rides, got exit 0:\n%s", res.out)
	}
	for _, want := range []string{
		fmt.Sprintf("pid %d (idle in transaction", holderPID), holdingQuery,
		fmt.Sprintf("%d attempts", migrations.LockAttempts), "lock timeout",
	} {
		if !strings.Contains(res.errOut, want) {
			t.Errorf("want the failure to say %q, got:\n%s", want, res.errOut)
		}
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := proctest.Run(t, migrate, env, "up"); code != 0 || !strings.Contains(out, "00013_refund_amount.sql") {
		t.Fatalf("want migration 13 applied once the transaction ended, got %d:\n%s%s", code, out, errOut)
	}
}
