package enqueuer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reconnection delays of the listening connection: quick at first, since a database restart or
// a dropped connection is usually over in moments, then backing off to a retry every 30 s, so
// that a database that stays down is not hammered. Polling keeps jobs moving meanwhile.
const (
	listenRetryDelayMin = 250 * time.Millisecond
	listenRetryDelayMax = 30 * time.Second
)

// listenCloseTimeout bounds saying goodbye to the server on a listening connection that may be
// broken already.
const listenCloseTimeout = time.Second

// listen takes a connection of its own from the pool and listens on NotifyChannel with it.
func (e *Enqueuer) listen(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("error acquiring connection to listen on: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{NotifyChannel}.Sanitize()); err != nil {
		closeListenConn(conn)
		return nil, fmt.Errorf("error listening on %s: %w", NotifyChannel, err)
	}
	return conn, nil
}

// runListener wakes the loop on every notification that conn receives until ctx ends. When the
// connection fails it reconnects, with a growing delay, and then wakes the loop once for the
// notifications it missed meanwhile.
func (e *Enqueuer) runListener(ctx context.Context, conn *pgxpool.Conn) {
	defer close(e.listenerDone)
	retryDelay := listenRetryDelayMin
	for {
		var err error
		if conn == nil {
			conn, err = e.listen(ctx)
			if err == nil {
				retryDelay = listenRetryDelayMin
				e.wakeUp()
			}
		}
		for err == nil {
			if _, err = conn.Conn().WaitForNotification(ctx); err == nil {
				e.wakeUp()
			}
		}
		if conn != nil {
			closeListenConn(conn)
			conn = nil
		}
		if ctx.Err() != nil {
			return
		}

		e.logger.WarnContext(ctx, "Enqueuer: not listening for staged jobs, retrying",
			slog.String("error", err.Error()), slog.Duration("retry_in", retryDelay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryDelay):
		}
		retryDelay = min(2*retryDelay, listenRetryDelayMax)
	}
}

// wakeUp cuts the loop's sleep short. The channel holds one wake-up, and one pending is enough:
// the pass it starts sees every job committed before it began.
func (e *Enqueuer) wakeUp() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// closeListenConn closes a listening connection rather than returning it to the pool, where it
// would carry its LISTEN, and the notifications queued on it, to whoever borrowed it next.
func closeListenConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), listenCloseTimeout)
	defer cancel()
	_ = conn.Hijack().Close(ctx) // Nothing to do about a failed goodbye: the socket is closed.
}
