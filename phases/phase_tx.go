package phases

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/models"
)

// phaseTx is the SERIALIZABLE transaction of one atomic phase, shaped to cost few round trips:
//
//   - BEGIN is not a round trip of its own: it is sent in one batch with the phase's first
//     statement.
//   - Reads (QueryRow) go to Postgres at once, because the phase needs their answers.
//   - Writes are queued on Writes by the models functions that take a *pgx.Batch, and go to
//     Postgres together, in one round trip, when the phase commits.
//
// So a phase that only writes (recording a charge and staging its receipt) costs two round trips,
// the batch and the COMMIT. COMMIT stays a round trip of its own on purpose: the writes'
// results must be checked before committing (the key's fenced update matches no row when another
// request took the key over), and a COMMIT sent in the same batch would run regardless.
//
// It satisfies models.DBTX, so the models' read functions run in it unchanged.
type phaseTx struct {
	pool *pgxpool.Pool
	conn *pgxpool.Conn // acquired by the first statement, released once the transaction ended
	tx   pgx.Tx        // nil until the first statement began the transaction

	// Writes are the phase's queued writes, sent by commit.
	Writes pgx.Batch

	// then holds the callbacks of afterWrites. Each queues writes that depend on what a read
	// queued among Writes found, once Writes have run.
	then []func(batch *pgx.Batch)
}

var serializable = pgx.TxOptions{IsoLevel: pgx.Serializable}

// send sends batch in the transaction, beginning it in the same round trip if this is its first
// statement.
func (t *phaseTx) send(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	if t.tx != nil {
		return t.tx.SendBatch(ctx, batch)
	}
	begun := &pgx.Batch{}
	begun.BeginTx(serializable)
	begun.QueuedQueries = append(begun.QueuedQueries, batch.QueuedQueries...)
	// The connection is held until the transaction ended and its outcome was read (commit), so
	// that what the server said on it before the end (RecordSerializationWarnings) is still
	// this transaction's to read.
	var br pgx.BatchResults
	if conn, err := t.pool.Acquire(ctx); err != nil {
		br = pgx.FailedBatchResults(begun, err)
	} else {
		t.conn = conn
		models.ForgetSerializationWarnings(conn.Conn().PgConn())
		br = conn.SendBatch(ctx, begun)
	}
	t.tx = br.Tx() // never nil: begun begins a transaction, even when it could not be sent
	return br
}

// QueryRow runs a read at once; the row must be scanned before the next statement.
func (t *phaseTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	batch := &pgx.Batch{}
	batch.Queue(sql, args...)
	br := t.send(ctx, batch)
	if _, err := br.Exec(); err != nil { // the BEGIN
		return &batchRow{br: br, err: err}
	}
	return &batchRow{br: br, row: br.QueryRow()}
}

// Exec and Query complete models.DBTX. The phases read with QueryRow and write through Writes,
// so these begin the transaction in a round trip of their own if they come first.
func (t *phaseTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.tx.Exec(ctx, sql, args...)
}

func (t *phaseTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return nil, err
	}
	return t.tx.Query(ctx, sql, args...)
}

func (t *phaseTx) ensureBegun(ctx context.Context) error {
	if t.tx != nil {
		return nil
	}
	return t.send(ctx, &pgx.Batch{}).Close()
}

// writeFirst queues writes ahead of every write queued so far.
func (t *phaseTx) writeFirst(queue func(batch *pgx.Batch)) {
	first := &pgx.Batch{}
	queue(first)
	t.Writes.QueuedQueries = append(first.QueuedQueries, t.Writes.QueuedQueries...)
}

// afterWrites has then called once the queued writes ran, to queue further writes that depend on
// what a read queued among them found. Those go in one more round trip before the COMMIT, and
// only when then queues any: a read that finds nothing costs no round trip.
func (t *phaseTx) afterWrites(then func(batch *pgx.Batch)) {
	t.then = append(t.then, then)
}

// commit sends the queued writes, checks every result, and commits.
// A commit that fails before its COMMIT leaves the transaction open, for rollback to end.
func (t *phaseTx) commit(ctx context.Context) error {
	if len(t.Writes.QueuedQueries) > 0 || t.tx == nil {
		if err := t.send(ctx, &t.Writes).Close(); err != nil {
			return err
		}
	}
	more := &pgx.Batch{}
	for _, then := range t.then {
		then(more)
	}
	if len(more.QueuedQueries) > 0 {
		if err := t.send(ctx, more).Close(); err != nil {
			return err
		}
	}
	err := t.tx.Commit(ctx)
	defer t.release() // the COMMIT ended the transaction, whatever it answered
	if err != nil {
		// Citus reports a serialization failure a worker found at COMMIT as XX000, with the
		// 40001 in a WARNING before it: retried like any other (see inSerializableTx).
		if t.conn != nil {
			err = models.CommitSerializationFailure(t.conn.Conn().PgConn(), err)
		}
		_, answered := errors.AsType[*pgconn.PgError](err)
		// Unknown unless the server answered, or answered ROLLBACK (an aborted transaction).
		// pgx's "conn closed" is no proof that the COMMIT was never sent: it also says so when
		// the connection broke while it waited for the answer.
		if !answered && !errors.Is(err, pgx.ErrTxCommitRollback) {
			return fmt.Errorf("error committing: %w: %w", ErrCommitOutcomeUnknown, err)
		}
		return fmt.Errorf("error committing: %w", err)
	}
	return nil
}

// rollback ends the transaction, if it began, without committing anything.
func (t *phaseTx) rollback(ctx context.Context) {
	if t.tx != nil {
		_ = t.tx.Rollback(ctx) // a broken connection is closed by pgx, rolling back for us
	}
	t.release()
}

// release hands the connection back to the pool, once; the pool closes one left in a
// transaction rather than reuse it.
func (t *phaseTx) release() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}

// batchRow is the row of a read sent in a batch, which ends the batch once scanned.
type batchRow struct {
	br  pgx.BatchResults
	row pgx.Row
	err error
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.err
	if err == nil {
		err = r.row.Scan(dest...)
	}
	if closeErr := r.br.Close(); err == nil {
		err = closeErr
	}
	return err
}
