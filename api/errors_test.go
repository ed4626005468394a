package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/phases"
)

func TestErrFromPhases(t *testing.T) {
	t.Parallel()

	tests := []struct {
		err        error
		status     int
		code       problem.Code
		retryAfter bool
	}{
		{phases.ErrParamsMismatch, http.StatusUnprocessableEntity, problem.CodeIdempotencyKeyReused, false},
		{phases.ErrKeyInUse, http.StatusConflict, problem.CodeIdempotencyKeyInUse, true},
		{phases.ErrLockLost, http.StatusConflict, problem.CodeIdempotencyKeyInUse, true},
		{fmt.Errorf("%w after 5 attempts: boom", phases.ErrConflict), http.StatusConflict, problem.CodeRequestConflict, true},
		{phases.ErrSimulationDisabled, http.StatusBadRequest, problem.CodeInvalidParameter, false},
		{&phases.PaymentUnavailableError{Err: context.DeadlineExceeded}, http.StatusServiceUnavailable, problem.CodePaymentProcessorUnavailable, true},
		{phases.ErrSimulated, http.StatusInternalServerError, problem.CodeInternalError, false},
		{errors.New("anything else"), http.StatusInternalServerError, problem.CodeInternalError, false},
		{fmt.Errorf("error locking key: %w", &pgconn.PgError{Code: "57P01"}), http.StatusServiceUnavailable, problem.CodeServiceUnavailable, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, http.StatusServiceUnavailable, problem.CodeServiceUnavailable, true},
		{fmt.Errorf("error committing: %w: %w", phases.ErrCommitOutcomeUnknown, errors.New("conn closed")), http.StatusServiceUnavailable, problem.CodeServiceUnavailable, true},
		{fmt.Errorf("error inserting key: %w", &pgconn.PgError{Code: "25006"}), http.StatusServiceUnavailable, problem.CodeServiceUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T_%s", tt.err, tt.code), func(t *testing.T) {
			t.Parallel()
			got := errFromPhases(tt.err)
			if got.problem.Status != tt.status || got.problem.Code != tt.code || (got.retryAfter > 0) != tt.retryAfter {
				t.Fatalf("%v: want %d %s retry-after=%t, got %d %s %s", tt.err, tt.status, tt.code, tt.retryAfter,
					got.problem.Status, got.problem.Code, got.retryAfter)
			}
		})
	}
}
