package api

import (
	"net/http"
	"testing"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// Each way a ride request ends is counted under the outcome the metric documents: a charge's
// outcome under the problem code the rider got, the rest under a name of their own.
func TestRideOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		code     problem.Code
		replayed bool
		want     string
	}{
		{"Created", http.StatusCreated, "", false, metrics.RideCreated},
		{"Replayed", http.StatusPaymentRequired, problem.CodeCardDeclined, true, metrics.RideReplayed},
		{"CardDeclined", http.StatusPaymentRequired, problem.CodeCardDeclined, false, "card_declined"},
		{"PaymentRejected", http.StatusPaymentRequired, problem.CodePaymentRejected, false, "payment_rejected"},
		{"PaymentUnavailable", http.StatusServiceUnavailable, problem.CodePaymentProcessorUnavailable, false, "payment_processor_unavailable"},
		{"NeedsReview", http.StatusInternalServerError, problem.CodePaymentNeedsReview, false, "payment_needs_review"},
		{"KeyInUse", http.StatusConflict, problem.CodeIdempotencyKeyInUse, false, metrics.RideKeyInUse},
		{"KeyReused", http.StatusUnprocessableEntity, problem.CodeIdempotencyKeyReused, false, metrics.RideKeyReused},
		{"Conflict", http.StatusConflict, problem.CodeRequestConflict, false, metrics.RideConflict},
		{"RateLimited", http.StatusTooManyRequests, problem.CodeBookingRateLimited, false, metrics.RideRateLimited},
		{"Invalid", http.StatusBadRequest, problem.CodeInvalidParameter, false, metrics.RideInvalid},
		{"Error", http.StatusServiceUnavailable, problem.CodeServiceUnavailable, false, metrics.RideError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := rideOutcome(tt.status, tt.code, tt.replayed); got != tt.want {
				t.Fatalf("rideOutcome(%d, %q, %v) = %q, want %q", tt.status, tt.code, tt.replayed, got, tt.want)
			}
		})
	}
}
