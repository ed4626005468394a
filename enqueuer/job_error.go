package enqueuer

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// jobsOwnFault reports whether err, from inserting jobs into River in tx, is a refusal of the
// jobs themselves that will recur however often and by whomever they are inserted. Only then
// may a job be set aside; any other error fails the batch, whose rows stay staged for the next
// pass. Setting a job aside for an error that would have passed leaves a valid receipt unsent
// until a person notices, while failing a batch for a lasting error costs a retry and an error
// line per pass; so an error is the job's fault only when it says so:
//
//   - River refused the job before asking the database: it checks kind, arguments and insert
//     options (priority, queue, tags, unique options) in Go, and says what is wrong in an error
//     of its own, such as "priority must be between 1 and 4". Such an error is neither a
//     *pgconn.PgError nor a connection's or context's error, and tx is still usable.
//   - Postgres refused the job's values: a data exception (class 22) or an integrity constraint
//     violation (class 23, such as a CHECK of river_job), which the same row meets every time.
//
// Everything else may pass, or says that something other than the job is wrong: a lost
// connection (08, or tx's connection closed by pgx after an I/O error), a serialization failure
// or deadlock (40001, 40P01), insufficient resources such as a full disk (53), a lock or
// statement timeout (55P03, 57014) or an administrator's cancellation or shutdown (57), a
// cancelled or expired ctx, a missing table (42P01) or a trigger's exception (P0001).
func jobsOwnFault(tx pgx.Tx, err error) bool {
	if tx.Conn().IsClosed() {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		class := pgErr.Code[:min(2, len(pgErr.Code))]
		return class == "22" || class == "23"
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		pgconn.Timeout(err), pgconn.SafeToRetry(err), errors.Is(err, pgconn.ErrConnClosed),
		errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return false
	}
	return true
}

// isUniqueDuplicateInBatch reports whether err is Postgres refusing to let one statement's
// ON CONFLICT DO UPDATE touch a row twice (21000, cardinality_violation): a batch holding two
// unique jobs with the same key, which River takes one at a time.
func isUniqueDuplicateInBatch(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "21000"
}
