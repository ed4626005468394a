package workers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
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

// runRunner runs a Runner, as a worker process does, on b's database and mail server until the
// test ends.
func (b *testBundle) runRunner(t *testing.T) {
	t.Helper()
	m, err := mailer.NewSMTP(b.smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	runner, err := NewRunner(Deps{Pool: b.pool, Mailer: m, MailFrom: testMailFrom, Logger: logger},
		RunnerConfig{StopTimeout: 10 * time.Second, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("error running the runner: %v", err)
		}
	})
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

// receiptOf is what phases stages for ride's receipts: the whole fare, charged or refunded.
func receiptOf(ride *models.Ride) jobargs.Receipt {
	return jobargs.Receipt{RideID: ride.ID, UserID: ride.UserID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency}
}

// receiptArgs are the args the API stages for ride's receipt.
func receiptArgs(ride *models.Ride) jobargs.SendRideReceipt {
	return jobargs.SendRideReceipt(receiptOf(ride))
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
// (discarded). Failed attempts that will be retried are skipped. The wait is long because it
// bounds a job that never ends, not how fast one does: a job retried twice overran 10 s on a
// machine at load 20.
func (b *testBundle) waitFinal(t *testing.T, job *rivertype.JobRow) *river.Event {
	t.Helper()
	const wait = 2 * time.Minute
	timeout := time.After(wait)
	for {
		select {
		case ev := <-b.events:
			if ev.Job.ID == job.ID && (ev.Kind != river.EventKindJobFailed || ev.Job.State == rivertype.JobStateDiscarded) {
				return ev
			}
		case <-timeout:
			t.Fatalf("job %d did not finish within %s", job.ID, wait)
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

// takeAll acquires every connection of the pool that no one holds, and keeps them until
// releaseAll. It counts what the pool has acquired rather than waiting for an acquisition to fail:
// opening a connection took longer than a short wait on a loaded machine, and the hog then took
// none.
func (h *poolHog) takeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.pool.Stat().AcquiredConns() < h.pool.Config().MaxConns {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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

// freezer plays a database server that froze (SIGSTOP, a hung machine) for the connections
// dialled through it: once freeze is called, those already open answer nothing, their reads and
// writes waiting until a deadline set on them passes (as pgx sets one to give up on a query) or
// they are closed; connections dialled after it work.
type freezer struct {
	dialer net.Dialer

	mu    sync.Mutex
	conns []*freezableConn
	count int
}

// pool opens a pool like config's, dialling through f, closed when the test ends.
func (f *freezer) pool(t *testing.T, config *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	config = config.Copy()
	config.ConnConfig.DialFunc = f.dial
	pool, err := pgxpool.NewWithConfig(t.Context(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func (f *freezer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := f.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	fc := &freezableConn{Conn: conn, changed: make(chan struct{}), closed: make(chan struct{})}
	f.mu.Lock()
	f.conns = append(f.conns, fc)
	f.mu.Unlock()
	return fc, nil
}

// freeze freezes every connection dialled so far.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.frozen.Store(true)
	}
	f.count += len(f.conns)
	f.conns = nil
}

// freezeAfterCommit makes every connection dialled so far freeze once it has sent a COMMIT: the
// server commits, and its answer is lost.
func (f *freezer) freezeAfterCommit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.freezeAfterCommit.Store(true)
	}
}

// numFrozen is how many connections freeze froze.
func (f *freezer) numFrozen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

type freezableConn struct {
	net.Conn
	frozen            atomic.Bool
	freezeAfterCommit atomic.Bool

	mu       sync.Mutex
	deadline time.Time
	changed  chan struct{} // closed, and replaced, whenever the deadline changes
	closed   chan struct{}
	once     sync.Once
}

func (c *freezableConn) Read(p []byte) (int, error) {
	if err := c.hang(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *freezableConn) Write(p []byte) (int, error) {
	if err := c.hang(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	if c.freezeAfterCommit.Load() && bytes.Contains(p, []byte("commit")) {
		c.frozen.Store(true)
	}
	return n, err
}

// hang waits, while the connection is frozen, until its deadline passes or it is closed.
func (c *freezableConn) hang() error {
	for c.frozen.Load() {
		c.mu.Lock()
		deadline, changed := c.deadline, c.changed
		c.mu.Unlock()
		var expired <-chan time.Time
		if !deadline.IsZero() {
			wait := time.Until(deadline)
			if wait <= 0 {
				return os.ErrDeadlineExceeded
			}
			timer := time.NewTimer(wait)
			expired = timer.C
			defer timer.Stop()
		}
		select {
		case <-expired:
			return os.ErrDeadlineExceeded
		case <-c.closed:
			return net.ErrClosed
		case <-changed:
		}
	}
	return nil
}

func (c *freezableConn) setDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *freezableConn) SetDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *freezableConn) SetReadDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *freezableConn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *freezableConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
