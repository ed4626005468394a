package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/rocketrides/rocketrides/internal/tracing"
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
		tracing.SetRoute(r.Context(), r.Method, route)
		s.metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(ww.Status())).Inc()
		s.metrics.HTTPRequestDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}
