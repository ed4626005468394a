package models

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

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
		{"StatementTimeout", fmt.Errorf("error locking: %w", &pgconn.PgError{Code: "57014"}), true},
		{"LockTimeout", &pgconn.PgError{Code: "55P03"}, true},
		{"Refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
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

func TestSanitizeErrorText(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, in, want string
	}{
		{"Plain", "payment processor unavailable: EOF", "payment processor unavailable: EOF"},
		{"NUL", "bad\x00byte", "badbyte"},
		{"InvalidUTF8", "cut in half: \xc3", "cut in half: \uFFFD"},
		{"LongIsTruncated", strings.Repeat("é", 2500), strings.Repeat("é", 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := SanitizeErrorText(tt.in)
			if got != tt.want || !utf8.ValidString(got) {
				t.Fatalf("want %q, got %q", tt.want, got)
			}
		})
	}
}
