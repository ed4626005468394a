package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// readyzTimeout bounds the database check, so that a load balancer's probe fails fast when the
// database hangs.
const readyzTimeout = 2 * time.Second

// healthz says the process is up. It checks nothing else, so that a database outage does not get
// every API process restarted.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says whether the process can serve requests, which needs the database.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyzTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		s.logger.WarnContext(ctx, "API: not ready", slog.String("error", err.Error()))
		writeProblem(w, newError(http.StatusServiceUnavailable, problem.CodeServiceUnavailable,
			"Service unavailable", "The database cannot be reached."))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
