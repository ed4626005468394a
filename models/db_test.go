package models

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"ConnClosed", fmt.Errorf("error committing: %w", pgconn.ErrConnClosed), true},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"ReadOnlyTransaction", &pgconn.PgError{Code: "25006"}, true},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, true},
		{"Deadline", context.DeadlineExceeded, true},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, false},
		{"SerializationFailure", &pgconn.PgError{Code: "40001"}, false},
		{"Bug", errors.New("bug: unhandled recovery point"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsUnavailable(tt.err); got != tt.want {
				t.Fatalf("IsUnavailable(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}
