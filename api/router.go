// Package api is the HTTP face of Rocket Rides: a chi router whose handlers decode and validate
// a request, hand it to the phases, and encode what comes back. It writes no SQL and keeps no
// request state of its own.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/phases"
)

// dbReadTimeout bounds the reads a handler makes itself (the rider behind a token, a ride): a
// pool connection and a statement, which take milliseconds. Ride requests are bounded by the
// executor instead (phases.Config.PhaseTimeout).
const dbReadTimeout = 5 * time.Second

// PortDefault is the port the API listens on when PORT does not say, and the one the docs'
// examples and .env.example use.
const PortDefault = 5004

// Server holds what the handlers need.
type Server struct {
	executor *phases.Executor
	logger   *slog.Logger
	limiter  *limiter
	metrics  *metrics.API
	pool     *pgxpool.Pool

	// tokenKey checks that a token was issued with the API's token secret before it is looked up.
	tokenKey authtoken.Key

	// trustedProxies are the proxies whose X-Forwarded-For is believed (see clientAddr).
	trustedProxies []netip.Prefix

	// webhookSecret verifies Stripe's events; empty, and POST /webhooks/stripe is off.
	webhookSecret string

	// readTimeout is dbReadTimeout; tests that hold a read at a lock lengthen it.
	readTimeout time.Duration

	// workCtx ends when AbortInFlight is called; every ride request's work hangs off it.
	workCtx     context.Context
	abortAction context.CancelFunc
}

// Config is what a Server takes besides its pool, executor and logger. The zero value is the
// production defaults, counted in series that no registry holds.
type Config struct {
	// Limits are the API's rate limits and caps; see Limits.
	Limits Limits

	// TokenKey is the key riders' tokens were made with (authtoken); the zero Key lets no
	// rider in.
	TokenKey authtoken.Key

	// Metrics receives the API's series; nil means a set that no registry holds.
	Metrics *metrics.API

	// TrustedProxies are the addresses of the proxies in front of the API whose
	// X-Forwarded-For is believed; none, and it is ignored (see clientAddr).
	TrustedProxies []netip.Prefix

	// StripeWebhookSecret is the signing secret of our webhook endpoint at Stripe (whsec_…),
	// which POST /webhooks/stripe verifies every event with. Empty turns the route off: an
	// unverified event must never change a ride.
	StripeWebhookSecret string
}

// NewServer returns a Server over executor, reading users and rides from pool.
func NewServer(pool *pgxpool.Pool, executor *phases.Executor, logger *slog.Logger, config Config) *Server {
	if config.Metrics == nil {
		config.Metrics = metrics.NewAPI(nil)
	}
	workCtx, abort := context.WithCancel(context.Background())
	return &Server{
		executor:       executor,
		limiter:        newLimiter(config.Limits),
		logger:         logger,
		metrics:        config.Metrics,
		pool:           pool,
		readTimeout:    dbReadTimeout,
		tokenKey:       config.TokenKey,
		trustedProxies: config.TrustedProxies,
		webhookSecret:  config.StripeWebhookSecret,
		workCtx:        workCtx,
		abortAction:    abort,
	}
}

// AbortInFlight cancels the work of every ride request in progress, for a shutdown that cannot
// wait for them. Each stops at a phase boundary or mid-phase (rolled back), unlocks its key and
// answers 503; a retry resumes from the last recovery point.
func (s *Server) AbortInFlight() { s.abortAction() }

// Handler is the whole API, every route in one place.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.assignRequestID, s.measureRequests, s.logRequests, s.recoverPanics)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, errNotFound("No such route."))
	})
	r.MethodNotAllowed(methodNotAllowed)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/openapi.yaml", s.openAPI)

	// Stripe's events carry no rider's token; their signature authenticates them.
	if s.webhookSecret != "" {
		r.With(s.shedLoad).Post("/webhooks/stripe", s.stripeWebhook)
	}

	// A request takes one of the process's slots (shedLoad) only once it passed its rider's own
	// limits and, for a booking, sent its body: one rider's flood, or a client that trickles
	// its body, holds slots of that rider's alone. A booking or cancel spends the requests
	// budget here, and its new key the bookings or cancels budget in the phases (admitNewKey).
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		r.With(s.limitRider(s.limiter.requests, s.metrics.RideRequests), s.readBody, s.shedLoad).Post("/rides", s.handleCreateRide)
		r.With(s.limitRider(s.limiter.requests, s.metrics.CancelRequests), s.readBody, s.shedLoad).Post("/rides/{id}/cancel", s.handleCancelRide)
		r.With(s.limitRider(s.limiter.reads, nil), s.shedLoad).Get("/rides", s.handleListRides)
		r.With(s.limitRider(s.limiter.reads, nil), s.shedLoad).Get("/rides/{id}", s.handleGetRide)
	})
	return r
}
