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
// jobs themselves, one that recurs however often and by whomever they are inserted. Only then is
// a job set aside; any other error fails the batch, whose rows stay staged for the next pass.
// Wrongly setting a job aside leaves a valid receipt unsent until a person notices, while
// wrongly failing a batch costs a retry and an error line per pass, so an error is the job's
// fault only when it says so: River's own checks in Go of kind, arguments and insert options
// ("priority must be between 1 and 4": no *pgconn.PgError, connection or context error, and tx
// still usable), or Postgres refusing the job's values (class 22, data exception; class 23,
// integrity constraint violation such as a CHECK of river_job). Anything else may pass or blames
// something other than the job: a lost connection (08, or tx's closed by pgx after an I/O error),
// serialization failure or deadlock (40001, 40P01), a full disk (53), a lock or statement
// timeout (55P03, 57014), an administrator (57), ctx, a missing table (42P01), a trigger (P0001).
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
