package main

import (
	"crypto/sha256"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// testBundle is a fresh database holding one charged ride whose receipt job waits in River.
type testBundle struct {
	url   string
	pool  *pgxpool.Pool
	ride  *models.Ride
	rider *models.User
	jobID int64
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := t.Context()
	w := &testBundle{url: dbtest.NewDB(t)}
	var err error
	w.pool, err = pgxpool.New(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.Close)

	hash := sha256.Sum256([]byte(t.Name()))
	w.rider, err = models.UserInsert(ctx, w.pool, models.UserInsertParams{
		Email: "rider@example.com", StripeCustomerID: "cus_worker", APITokenHash: hash[:],
	})
	if err != nil {
		t.Fatal(err)
	}
	var rideID int64
	if err := w.pool.QueryRow(ctx, `
		INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
		VALUES (0, 0, 1, 1, 'ch_worker', $1) RETURNING id`, w.rider.ID).Scan(&rideID); err != nil {
		t.Fatal(err)
	}
	if w.ride, err = models.RideGetByIDForUser(ctx, w.pool, rideID, w.rider.ID); err != nil {
		t.Fatal(err)
	}

	// An insert-only client, as the enqueuer is.
	client, err := river.NewClient(riverpgxv5.New(w.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(ctx, jobargs.SendRideReceipt{
		RideID: rideID, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.jobID = res.Job.ID
	return w
}

func (w *testBundle) jobState(t *testing.T) string {
	t.Helper()
	var state string
	if err := w.pool.QueryRow(t.Context(), `SELECT state FROM river_job WHERE id = $1`, w.jobID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	return state
}

func sigterm(t *testing.T, p *proctest.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// silentServer listens on a free port of loopback, accepts connections and never says a word,
// as a mail server that hangs before its greeting does, and returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	t.Cleanup(func() {
		_ = listener.Close()
		<-done
		for _, conn := range conns {
			_ = conn.Close()
		}
	})
	return listener.Addr().String()
}
