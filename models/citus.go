package models

// What the models do differently on Citus, where the rider tables are spread over workers by
// user_id. On a single Postgres none of it comes into play.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "XX000" {
		return err
	}
	code, ok := conn.CustomData()[serializationWarningKey].(string)
	if !ok {
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
	var citus bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return false, fmt.Errorf("error looking for Citus: %w", err)
	}
	if !citus {
		return false, nil
	}
	var distributed bool
	err := db.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1))`, table).Scan(&distributed)
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
// rider's ids: what the functions that lock rider by rider on Citus lock next. queryErr is the
// error of the query that returned rows, passed on.
func groupByRider(rows pgx.Rows, queryErr error) (riders []int64, byRider map[int64][]int64, err error) {
	if queryErr != nil {
		return nil, nil, queryErr
	}
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
