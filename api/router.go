// Package api is the HTTP face of Rocket Rides: a chi router whose handlers decode and validate
// a request, hand it to the phases, and encode what comes back. It writes no SQL and keeps no
// request state of its own.
package api

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/phases"
)

// Server holds what the handlers need.
type Server struct {
	executor *phases.Executor
	logger   *slog.Logger
	pool     *pgxpool.Pool
}

// NewServer returns a Server over executor, reading users and rides from pool.
func NewServer(pool *pgxpool.Pool, executor *phases.Executor, logger *slog.Logger) *Server {
	return &Server{executor: executor, logger: logger, pool: pool}
}

// Handler is the whole API, every route in one place.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.recoverPanics, s.logRequests)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, errNotFound("No such route."))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, errMethodNotAllowed(r.Method))
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)

	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		r.Post("/rides", s.createRide)
		r.Get("/rides/{id}", s.getRide)
	})
	return r
}
