package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// routeUnmatched is the route label of requests that matched no route, so that scanners
// probing random paths add one series, not one per path.
const routeUnmatched = "unmatched"

// statusWriter returns w as a writer that remembers the status it answered with: w itself when
// an outer middleware already made it one, so that a request's writer is wrapped once however
// many middlewares read its status.
func statusWriter(w http.ResponseWriter, r *http.Request) middleware.WrapResponseWriter {
	if ww, ok := w.(middleware.WrapResponseWriter); ok {
		return ww
	}
	return middleware.NewWrapResponseWriter(w, r.ProtoMajor)
}

// measureRequests counts every answered request in rocketrides_http_requests_total and times it
// in rocketrides_http_request_duration_seconds, by chi's route pattern (/rides/{id}, not the id).
func (s *Server) measureRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := statusWriter(w, r)
		next.ServeHTTP(ww, r)

		route := routeUnmatched
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePattern() != "" {
			route = rctx.RoutePattern()
		}
		s.metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(ww.Status())).Inc()
		s.metrics.HTTPRequestDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// rideOutcome names how a ride request ended, for rocketrides_ride_requests_total: from the
// status and problem code it was answered with, and whether the answer was a replay.
func rideOutcome(status int, code problem.Code, replayed bool) string {
	switch {
	case replayed:
		return metrics.RideReplayed
	case status < 300:
		return metrics.RideCreated
	}
	switch code {
	case problem.CodeCardDeclined:
		return metrics.RideCardDeclined
	case problem.CodePaymentRejected:
		return metrics.RidePaymentRejected
	case problem.CodeIdempotencyKeyInUse:
		return metrics.RideKeyInUse
	case problem.CodeIdempotencyKeyReused:
		return metrics.RideKeyReused
	case problem.CodeRequestConflict:
		return metrics.RideConflict
	case problem.CodePaymentProcessorUnavailable:
		return metrics.RidePaymentUnavailable
	case problem.CodePaymentNeedsReview:
		return metrics.RideNeedsReview
	}
	switch {
	case status == http.StatusTooManyRequests:
		return metrics.RideRateLimited
	case status < 500:
		return metrics.RideInvalid
	default:
		return metrics.RideError
	}
}

// cancelOutcome names how a cancel ended, for rocketrides_cancel_requests_total: a problem code
// of the cancel's own, or the outcome a ride request would have had.
func cancelOutcome(status int, code problem.Code, replayed bool) string {
	switch {
	case replayed:
		return metrics.RideReplayed
	case status < 300:
		return metrics.CancelCancelled
	}
	switch code {
	case problem.CodeRideAlreadyCancelled, problem.CodeRideAlreadyRefunded, problem.CodeRideDisputed,
		problem.CodeRideNotCharged, problem.CodeNotFound:
		return string(code)
	}
	return rideOutcome(status, code, false)
}
