// Package models is the data layer: the plain SQL that reads and writes each table. A table's
// type and its queries live in the file named for the table (idempotency_key.go). A part of a
// table with a name of its own lives beside it, in a file named for that part: the points a key
// passes (recovery_point.go), the background processes' queries on keys
// (idempotency_key_background.go), a ride's status (ride_status.go). This file holds what they
// all share, and at its end what changes on Citus.
// Functions take a DBTX, so the caller decides which transaction they run in; models never
// begins or commits one.
package models

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what every query in this package runs on. Both *pgxpool.Pool and pgx.Tx satisfy it,
// which lets the phases run several queries in one transaction of their choosing.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewID returns a random positive 63-bit id for a new row of a table that the phases read and
// write under SERIALIZABLE. Sequential ids would put every new row on one index page, where
// SERIALIZABLE aborts unrelated riders (see migrations/00006_random_ids.sql). The application
// draws ids itself, rather than taking a column default, so that a ride and the rows that point
// at it go to Postgres in one round trip. Two ids among a billion rows collide with odds of
// about one in ten billion, and the primary key would refuse the second anyway.
func NewID() int64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails; see crypto/rand.Read
		if id := int64(binary.BigEndian.Uint64(b[:]) >> 1); id != 0 {
			return id
		}
	}
}

// ErrNotFound is returned when a lookup matches no row, so that callers can branch on it
// without knowing about pgx.
var ErrNotFound = errors.New("not found")

// ErrLockLost is returned by a fenced write of a key that is no longer locked with the caller's
// lock generation. Another request took the key over after the caller's lease ran out, or the
// reaper deleted the key. Either way, the caller's request no longer holds it.
var ErrLockLost = errors.New("idempotency key lock was taken over by another request")

// notFound maps pgx's no-rows error to ErrNotFound and leaves every other error alone.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// IsUnavailable reports whether err means the database is out of reach, rather than that a
// query was wrong: a refused or broken connection, a server shutting down or starting up, or a
// query that could not be served in time (a statement or lock timeout, a deadline). The caller
// should answer "try again later", not "bug".
func IsUnavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) {
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		// Class 08: connection exception. 57P01-57P03: shutdown, crash, cannot connect now.
		// 57014: statement_timeout or a cancelled query. 55P03: lock_timeout. 25006: a write on
		// a standby, which an old primary becomes once it is demoted.
		codes := []string{"57P01", "57P02", "57P03", "57014", "55P03", "25006"}
		return strings.HasPrefix(pgErr.Code, "08") || slices.Contains(codes, pgErr.Code)
	}
	// ErrConnClosed: a statement on a connection that pgx had already closed when it broke.
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, context.DeadlineExceeded)
}

// ErrUniqueViolation is returned when an insert collides with a unique constraint that the
// caller can do something about (a duplicate email, say).
var ErrUniqueViolation = errors.New("unique violation")

// uniqueViolation maps Postgres's 23505 to ErrUniqueViolation, keeping the original in the chain.
func uniqueViolation(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return errors.Join(ErrUniqueViolation, err)
	}
	return err
}

// maxErrorTextLen is the CHECK on idempotency_keys.last_error and on staged_jobs.last_error
// (migration 00005): enough for any error chain, short enough that a poisoned job cannot bloat
// its row.
const maxErrorTextLen = 2000

// SanitizeErrorText makes an error message fit a last_error column. Postgres rejects NUL bytes
// and invalid UTF-8, and an error that quotes a remote server's answer may hold either. A
// rejected write of a key's last error would leave the key locked, and of a staged job's would
// stop the enqueuer at that job.
func SanitizeErrorText(text string) string {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	if r := []rune(text); len(r) > maxErrorTextLen {
		text = string(r[:maxErrorTextLen])
	}
	return text
}

// countByKey runs sql, which selects (key text, count bigint) rows, and returns the counts by
// key: one entry for each of keys, 0 if sql counted none, and one for any other key it returned.
func countByKey(ctx context.Context, db DBTX, keys []string, sql string, args ...any) (map[string]int64, error) {
	rows, _ := db.Query(ctx, sql, args...)
	counts := make(map[string]int64, len(keys))
	for _, key := range keys {
		counts[key] = 0
	}
	var key string
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&key, &n}, func() error {
		counts[key] = n
		return nil
	})
	return counts, err
}

// The rest of this file is what the models do differently on Citus, where the rider tables are
// spread over workers by user_id. On a single Postgres none of it comes into play.

// serializationWarningKey is where RecordSerializationWarnings keeps, in a connection's
// CustomData, the code of the last serialization warning it received.
const serializationWarningKey = "rocketrides.serialization_warning"

// RecordSerializationWarnings is the OnNotice handler of every connection the service opens. It
// keeps the code of a serialization failure (40001) or a deadlock (40P01) that the server sent
// as a WARNING. That is how Citus reports a failure a worker found at COMMIT: a WARNING with the
// 40001, then the ERROR the client gets, XX000 "could not commit transaction for shard … on at
// least one active node". CommitSerializationFailure reads the code kept.
func RecordSerializationWarnings(conn *pgconn.PgConn, notice *pgconn.Notice) {
	if notice.Code == "40001" || notice.Code == "40P01" {
		conn.CustomData()[serializationWarningKey] = notice.Code
	}
}

// ForgetSerializationWarnings clears what RecordSerializationWarnings kept on conn. A
// transaction calls it as it begins.
func ForgetSerializationWarnings(conn *pgconn.PgConn) {
	delete(conn.CustomData(), serializationWarningKey)
}

// CommitSerializationFailure turns err, the error of a failed COMMIT on conn, into the
// serialization failure (or deadlock) behind it, when the server reported one in a WARNING
// before it failed the COMMIT with XX000. The caller then retries it like any other. Any other
// err comes back as it is. The original error stays in the chain.
func CommitSerializationFailure(conn *pgconn.PgConn, err error) error {
	pgErr, failed := errors.AsType[*pgconn.PgError](err)
	code, warned := conn.CustomData()[serializationWarningKey].(string)
	if !failed || pgErr.Code != "XX000" || !warned {
		return err
	}
	return errors.Join(&pgconn.PgError{Severity: "ERROR", Code: code,
		Message: "serialization failure reported in a WARNING before the COMMIT failed"}, err)
}

// Distributed reports whether table is a Citus distributed table: whether this database is a
// Citus coordinator that spreads the rider tables over workers by user_id. A statement that
// locks rows (FOR UPDATE) must then stay on one rider's shard; the enqueuer and the reaper see
// to that.
func Distributed(ctx context.Context, db DBTX, table string) (bool, error) {
	var citus, distributed bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus)
	// pg_dist_partition exists only where Citus is installed.
	if err == nil && citus {
		err = db.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1))`, table).Scan(&distributed)
	}
	if err != nil {
		return false, fmt.Errorf("error looking up how %s is distributed: %w", table, err)
	}
	return distributed, nil
}

// DistributedTable remembers whether a table is distributed (see Distributed). It asks at first
// use, and again after Forget. A caller calls Forget when a statement failed, because the table
// may have been laid out for Citus since. It is safe for concurrent use.
type DistributedTable struct {
	Table string
	known atomic.Pointer[bool]
}

// Is reports whether the table is distributed, asking db the first time.
func (d *DistributedTable) Is(ctx context.Context, db DBTX) (bool, error) {
	if known := d.known.Load(); known != nil {
		return *known, nil
	}
	distributed, err := Distributed(ctx, db, d.Table)
	if err != nil {
		return false, err
	}
	d.known.Store(&distributed)
	return distributed, nil
}

// Forget makes the next Is ask again.
func (d *DistributedTable) Forget() { d.known.Store(nil) }

// groupByRider reads (user_id, id) rows into the riders, in the order they first came, and each
// rider's ids: what the functions that lock rider by rider on Citus lock next. It returns the
// error of the query that returned rows, if that failed.
func groupByRider(rows pgx.Rows) (riders []int64, byRider map[int64][]int64, err error) {
	byRider = map[int64][]int64{}
	var userID, id int64
	_, err = pgx.ForEachRow(rows, []any{&userID, &id}, func() error {
		if _, ok := byRider[userID]; !ok {
			riders = append(riders, userID)
		}
		byRider[userID] = append(byRider[userID], id)
		return nil
	})
	return riders, byRider, err
}
