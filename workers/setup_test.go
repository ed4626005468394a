package workers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

const testMailFrom = "Rocket Rides <receipts@rocketrides.example>"

// testBundle is one test's world: a fresh database with a rider, a mail server (with STARTTLS, as a
// real submission server has), and a started River client running this package's workers.
type testBundle struct {
	pool   *pgxpool.Pool
	smtp   *smtptest.Server
	client *river.Client[pgx.Tx]
	events <-chan *river.Event
	rider  *models.User

	// metrics are the workers' series, into which CountFailures counts too.
	metrics *metrics.Worker
}

// setup builds a bundle. River retries failed jobs at once (retryNow) so that retries take
// milliseconds, not River's seconds to hours.
func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith builds a bundle as setup does, letting modify, if not nil, change the workers'
// deps before they are registered.
func setupWith(t *testing.T, modify func(b *testBundle, deps *Deps)) *testBundle {
	t.Helper()
	b := &testBundle{
		pool:    dbtest.NewPool(t),
		smtp:    smtptest.NewServer(t, smtptest.Options{StartTLS: true}),
		metrics: metrics.NewWorker(nil),
	}
	b.rider = b.newRider(t)

	m, err := mailer.NewSMTP(b.smtp.URL(), mailer.WithTLSConfig(b.smtp.ClientTLSConfig()))
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	// Warnings and worse only, as River's info lines drown the test's own output.
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	deps := Deps{Pool: b.pool, Mailer: m, MailFrom: testMailFrom, Logger: logger, Metrics: b.metrics}
	if modify != nil {
		modify(b, &deps)
	}
	if err := Register(workers, deps); err != nil {
		t.Fatal(err)
	}
	b.client, err = river.NewClient(riverpgxv5.New(b.pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 5}},
		Workers:           workers,
		RetryPolicy:       retryNow{},
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond, // retried jobs are found by polling
		TestOnly:          true,
		Logger:            logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	CountFailures(b.client, b.metrics) // until River stops
	var cancel func()
	b.events, cancel = b.client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	if err := b.client.Start(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		ctx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		if err := b.client.Stop(ctx); err != nil {
			t.Errorf("error stopping River: %v", err)
		}
	})
	return b
}

// retryNow retries a failed job at once.
type retryNow struct{}

func (retryNow) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Millisecond) }

var riderSeq atomic.Int64

func (b *testBundle) newRider(t *testing.T) *models.User {
	t.Helper()
	n := riderSeq.Add(1)
	hash := sha256.Sum256(fmt.Appendf(nil, "token-%d", n))
	user, err := models.UserInsert(t.Context(), b.pool, models.UserInsertParams{
		Email:            fmt.Sprintf("rider%d@example.com", n),
		StripeCustomerID: fmt.Sprintf("cus_%d", n),
		APITokenHash:     hash[:],
	})
	if err != nil {
		t.Fatal(err)
	}
	return user
}

// newRide inserts a ride of user charged with chargeID (none if empty). Its idempotency key is
// NULL, as after the reaper deleted the key: the worker must not need it.
func (b *testBundle) newRide(t *testing.T, user *models.User, chargeID string) *models.Ride {
	t.Helper()
	var charge *string
	if chargeID != "" {
		charge = &chargeID
	}
	var id int64
	err := b.pool.QueryRow(t.Context(), `
		INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
		VALUES (37.7749, -122.4194, 37.8044, -122.2712, $1, $2)
		RETURNING id`, charge, user.ID).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	ride, err := models.RideGetByIDForUser(t.Context(), b.pool, id, user.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ride
}

// receiptArgs are the args the API stages for ride.
func receiptArgs(ride *models.Ride) jobargs.SendRideReceipt {
	return jobargs.SendRideReceipt{RideID: ride.ID, UserID: ride.UserID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency}
}

func (b *testBundle) insertJob(t *testing.T, args river.JobArgs, opts *river.InsertOpts) *rivertype.JobRow {
	t.Helper()
	res, err := b.client.Insert(t.Context(), args, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.Job
}

// waitFinal waits for the event that ends job: completed, cancelled, or failed for good
// (discarded). Failed attempts that will be retried are skipped.
func (b *testBundle) waitFinal(t *testing.T, job *rivertype.JobRow) *river.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-b.events:
			if ev.Job.ID == job.ID && (ev.Kind != river.EventKindJobFailed || ev.Job.State == rivertype.JobStateDiscarded) {
				return ev
			}
		case <-timeout:
			t.Fatalf("job %d did not finish within 10s", job.ID)
		}
	}
}

func (b *testBundle) jobRow(t *testing.T, id int64) *rivertype.JobRow {
	t.Helper()
	job, err := b.client.JobGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// receipt returns the receipt recorded for ride, or nil.
func (b *testBundle) receipt(t *testing.T, ride *models.Ride) *models.RideReceipt {
	t.Helper()
	r, err := models.RideReceiptGet(t.Context(), b.pool, ride.ID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// afterSend is a mailer that runs hook each time the mail server accepted a message, before
// Send returns: what the rest of a busy worker process does meanwhile.
type afterSend struct {
	mailer.Mailer
	hook func()
}

func (m afterSend) Send(ctx context.Context, msg *mailer.Message) error {
	if err := m.Mailer.Send(ctx, msg); err != nil {
		return err
	}
	m.hook()
	return nil
}

// poolHog plays the other jobs of a busy worker, which hold every connection of its pool.
type poolHog struct {
	pool *pgxpool.Pool

	mu    sync.Mutex
	conns []*pgxpool.Conn
}

// takeAll acquires every connection of the pool that is free or can be opened, and keeps them
// until releaseAll.
func (h *poolHog) takeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		conn, err := h.pool.Acquire(ctx)
		cancel()
		if err != nil {
			return
		}
		h.conns = append(h.conns, conn)
	}
}

func (h *poolHog) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, conn := range h.conns {
		conn.Release()
	}
	h.conns = nil
}

// numTaken is how many connections takeAll took.
func (h *poolHog) numTaken() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}
