package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// LockTimeout bounds each lock a migration waits for. A statement such as ALTER TABLE queued
// behind a long transaction holds up every later statement on its table, the rides' included,
// until it gets its lock: with this bound a ride waits a second at most, well within its
// phase's deadline, and the migration gives up and tries again.
const LockTimeout = time.Second

// Retries of a migration that timed out on a lock. Between attempts, the pause lets the
// statements that queued behind it through.
const (
	LockAttempts   = 5
	lockRetryPause = 2 * time.Second
)

// ApplicationName is the application_name of migration sessions, by which the watch for what
// blocks them finds them.
const ApplicationName = "rocketrides-migrate"

// blockerWatchInterval is how often a migration's blockers are looked up while it runs.
const blockerWatchInterval = 100 * time.Millisecond

// lockNotAvailable is Postgres's error code for a lock_timeout that ran out.
const lockNotAvailable = "55P03"

// ErrLockTimeout says that a migration gave up waiting for a lock LockAttempts times.
var ErrLockTimeout = errors.New("migration kept waiting for a lock")

// IsLockTimeout reports whether err is a lock_timeout that ran out.
func IsLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable
}

// RetryLockTimeouts runs step, again after a pause when a lock it waited for timed out, at most
// LockAttempts times. Each step must be safe to run again after a lock timeout: goose rolls back
// a migration in a transaction, and those outside one are written to be run again; what such a
// migration cannot undo, an index that CREATE INDEX CONCURRENTLY left invalid, is dropped before
// each attempt (dropInvalidIndexes). Once the attempts are used up, the error wraps
// ErrLockTimeout and names the sessions that held the migration up, as seen while it waited.
func RetryLockTimeouts(ctx context.Context, db *sql.DB, step func(ctx context.Context) error) error {
	w, err := watchBlockers(ctx, db)
	if err != nil {
		return err
	}
	defer w.stop()
	for attempt := 1; ; attempt++ {
		err := dropInvalidIndexes(ctx, db)
		if err == nil {
			err = step(ctx)
		}
		if !IsLockTimeout(err) {
			return err
		}
		if attempt == LockAttempts {
			return fmt.Errorf("%w: %d attempts each gave up after %s; held up by %s: %w",
				ErrLockTimeout, LockAttempts, LockTimeout, w.describe(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("error waiting to retry a migration: %w (after %w)", ctx.Err(), err)
		case <-time.After(lockRetryPause):
		}
	}
}

// blocker is a session that held a lock a migration waited for.
type blocker struct {
	pid     int
	state   string
	xactAge time.Duration
	query   string
}

// blockerWatch looks up, while a migration runs, which sessions block the migration's sessions,
// and keeps the last it saw: once the lock timeout ends the wait, Postgres no longer says.
type blockerWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	last []blocker
	err  error
}

func watchBlockers(ctx context.Context, db *sql.DB) (*blockerWatch, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("error connecting to watch for locks: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &blockerWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer conn.Close()
		ticker := time.NewTicker(blockerWatchInterval)
		defer ticker.Stop()
		for {
			blockers, err := lookUpBlockers(ctx, conn)
			w.mu.Lock()
			if err != nil && ctx.Err() == nil {
				w.err = err
			} else if len(blockers) > 0 {
				w.last, w.err = blockers, nil
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return w, nil
}

func (w *blockerWatch) stop() {
	w.cancel()
	<-w.done
}

// describe names the blockers last seen, or says why none is known.
func (w *blockerWatch) describe() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		if w.err != nil {
			return fmt.Sprintf("a session not known (error looking it up: %v)", w.err)
		}
		return "a session not seen (it held the lock for less than " + blockerWatchInterval.String() + ")"
	}
	var parts []string
	for _, b := range w.last {
		parts = append(parts, fmt.Sprintf("pid %d (%s, its transaction open for %s): %s",
			b.pid, b.state, b.xactAge.Round(time.Second), b.query))
	}
	return strings.Join(parts, "; ")
}

// lookUpBlockers returns the sessions that block a migration session of this database waiting
// for a lock: their state, the age of their transaction, and their last query.
func lookUpBlockers(ctx context.Context, conn *sql.Conn) ([]blocker, error) {
	rows, err := conn.QueryContext(ctx, `
		SELECT DISTINCT b.pid, coalesce(b.state, ''),
		       coalesce(extract(epoch FROM now() - b.xact_start), 0), left(coalesce(b.query, ''), 200)
		FROM pg_stat_activity m
		CROSS JOIN LATERAL unnest(pg_blocking_pids(m.pid)) AS bp(pid)
		JOIN pg_stat_activity b ON b.pid = bp.pid
		WHERE m.application_name = $1 AND m.pid <> pg_backend_pid() AND m.datname = current_database()
		  AND m.wait_event_type = 'Lock'
		ORDER BY 1`, ApplicationName)
	if err != nil {
		return nil, fmt.Errorf("error looking up what blocks the migration: %w", err)
	}
	defer rows.Close()
	var out []blocker
	for rows.Next() {
		var (
			b       blocker
			seconds float64
		)
		if err := rows.Scan(&b.pid, &b.state, &seconds, &b.query); err != nil {
			return nil, fmt.Errorf("error looking up what blocks the migration: %w", err)
		}
		b.xactAge = time.Duration(seconds * float64(time.Second))
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error looking up what blocks the migration: %w", err)
	}
	return out, nil
}
