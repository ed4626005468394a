package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// createRide is POST /rides: book a ride and charge for it, exactly once per Idempotency-Key.
// Every answer is counted in rocketrides_ride_requests_total by its outcome.
func (s *Server) createRide(w http.ResponseWriter, r *http.Request) {
	outcome, apiErr := s.bookRide(w, r)
	s.metrics.RideRequests.WithLabelValues(writeAnswer(w, outcome, apiErr, rideOutcome)).Inc()
}

// writeAnswer sends a request's stored outcome, marked as a replay when it is one, or, when it
// has none, apiErr; and returns the answer's name for the metrics, as outcomeOf names it.
func writeAnswer(w http.ResponseWriter, outcome *phases.Outcome, apiErr *apiError,
	outcomeOf func(status int, code problem.Code, replayed bool) string) string {
	if apiErr != nil {
		writeProblem(w, apiErr)
		return outcomeOf(apiErr.problem.Status, apiErr.problem.Code, false)
	}
	if outcome.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	var code problem.Code
	if outcome.StatusCode >= 400 {
		code = writeStoredProblem(w, outcome.StatusCode, outcome.Body)
	} else {
		writeBody(w, outcome.StatusCode, jsonContentType, outcome.Body)
	}
	return outcomeOf(outcome.StatusCode, code, outcome.Replayed)
}

// bookRide decodes and validates a ride request and runs it through the phases. It returns the
// request's stored outcome, which may itself be an error that finished the request (a declined
// card), or the error to answer with when the request did not finish.
func (s *Server) bookRide(w http.ResponseWriter, r *http.Request) (*phases.Outcome, *apiError) {
	key, body, apiErr := keyAndBody(w, r)
	if apiErr != nil {
		return nil, apiErr
	}
	params, raiseError, apiErr := parseRideParams(r.Header.Get("Content-Type"), body)
	if apiErr != nil {
		return nil, apiErr
	}
	user := userFrom(r.Context())
	return s.runPhases(r, "ride request", func(ctx context.Context) (*phases.Outcome, error) {
		return s.executor.CreateRide(ctx, &phases.CreateRideRequest{
			User:           user,
			IdempotencyKey: key,
			Params:         params,
			OriginIP:       clientAddr(r, s.trustedProxies),
			RaiseError:     raiseError,
			AdmitNewKey:    s.admitNewKey(s.limiter.bookings, user.ID),
		})
	})
}

// keyAndBody reads what every request run through the phases carries: its Idempotency-Key and
// its body.
func keyAndBody(w http.ResponseWriter, r *http.Request) (string, []byte, *apiError) {
	key, apiErr := idempotencyKeyFrom(r.Header)
	if apiErr != nil {
		return "", nil, apiErr
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return "", nil, newError(http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge, "Request too large",
				"The request body must be at most 64 KiB.")
		}
		return "", nil, errInvalidParameter("", "The request body could not be read.")
	}
	return key, body, nil
}

// runPhases runs a request through the phases and maps an error to the answer the client gets.
// The work is detached from the client's connection: a client that hangs up mid-request would
// otherwise abort a phase halfway, which is safe but wasteful. The executor bounds it
// (phases.Config.RequestTimeout), and shutdown cancels it.
func (s *Server) runPhases(r *http.Request, what string, run func(ctx context.Context) (*phases.Outcome, error)) (*phases.Outcome, *apiError) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	defer context.AfterFunc(s.workCtx, cancel)()

	outcome, err := run(ctx)
	if err != nil && s.workCtx.Err() != nil {
		return nil, errShuttingDown()
	}
	if err != nil {
		apiErr := errFromPhases(err)
		if apiErr.problem.Status >= 500 {
			s.logger.ErrorContext(ctx, "API: "+what+" failed",
				slog.Int64("user_id", userFrom(r.Context()).ID), slog.String("error", err.Error()))
		}
		return nil, apiErr
	}
	return outcome, nil
}

// cancelRide is POST /rides/{id}/cancel: refund one of the caller's own charged rides, exactly
// once per Idempotency-Key, and at most once per ride. It takes no parameters but the ride in the
// path. Every answer is counted in rocketrides_cancel_requests_total by its outcome.
func (s *Server) cancelRide(w http.ResponseWriter, r *http.Request) {
	outcome, apiErr := s.cancel(w, r)
	s.metrics.CancelRequests.WithLabelValues(writeAnswer(w, outcome, apiErr, cancelOutcome)).Inc()
}

// cancel validates a cancel and runs it through the phases, as bookRide does a booking.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) (*phases.Outcome, *apiError) {
	key, body, apiErr := keyAndBody(w, r)
	if apiErr != nil {
		return nil, apiErr
	}
	// A ride id that is no number names no ride; like any unknown ride, that is a 404, but not
	// one stored on a key.
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		return nil, errNotFound("No such ride.")
	}
	raw, apiErr := decodeRideParams(r.Header.Get("Content-Type"), body)
	if apiErr != nil {
		return nil, apiErr
	}
	for name := range raw {
		return nil, errInvalidParameter(name, "A cancel takes no parameters; "+name+" is not one.")
	}
	user := userFrom(r.Context())
	return s.runPhases(r, "cancel", func(ctx context.Context) (*phases.Outcome, error) {
		return s.executor.CancelRide(ctx, &phases.CancelRideRequest{
			User:           user,
			IdempotencyKey: key,
			RideID:         id,
			OriginIP:       clientAddr(r, s.trustedProxies),
			AdmitNewKey:    s.admitNewKey(s.limiter.cancels, user.ID),
		})
	})
}

// getRide is GET /rides/{id}: one of the caller's own rides. Anyone else's is a 404, so that
// ride ids reveal nothing.
func (s *Server) getRide(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		writeProblem(w, errNotFound("No such ride."))
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), dbReadTimeout)
	defer cancel()
	ride, err := models.RideGetByIDForUser(ctx, s.pool, id, userFrom(r.Context()).ID)
	if errors.Is(err, models.ErrNotFound) {
		writeProblem(w, errNotFound("No such ride."))
		return
	}
	if err != nil {
		s.logger.ErrorContext(r.Context(), "API: failed to get ride", slog.String("error", err.Error()))
		if models.IsUnavailable(err) {
			writeProblem(w, errDatabaseUnavailable())
			return
		}
		writeProblem(w, errInternal())
		return
	}

	writeJSON(w, http.StatusOK, map[string]any{"ride": resource.NewRide(ride)})
}

// Pages of GET /rides: Stripe's list conventions, limit between 1 and 100.
const (
	listLimitDefault = 10
	listLimitMax     = 100
)

// listRides serves GET /rides: the caller's rides, newest first, a page at a time. A page ends
// where limit says; has_more tells whether another follows, which starting_after (the last
// ride's id) asks for.
func (s *Server) listRides(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	for name, values := range query {
		if name != "limit" && name != "starting_after" {
			writeProblem(w, errInvalidParameter(name, name+" is not a known parameter."))
			return
		}
		if len(values) > 1 {
			writeProblem(w, errInvalidParameter(name, name+" was given more than once."))
			return
		}
	}
	limit := listLimitDefault
	if v := query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > listLimitMax {
			writeProblem(w, errInvalidParameter("limit", fmt.Sprintf("limit must be a whole number from 1 to %d.", listLimitMax)))
			return
		}
		limit = n
	}
	var after int64
	if v := query.Get("starting_after"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			writeProblem(w, errInvalidParameter("starting_after", "starting_after must be a ride id."))
			return
		}
		after = id
	}

	ctx, cancel := context.WithTimeout(r.Context(), dbReadTimeout)
	defer cancel()
	rides, hasMore, err := models.RideListForUser(ctx, s.pool, userFrom(r.Context()).ID, limit, after)
	if errors.Is(err, models.ErrNotFound) {
		writeProblem(w, errInvalidParameter("starting_after", "starting_after names no ride of yours."))
		return
	}
	if err != nil {
		s.logger.ErrorContext(r.Context(), "API: failed to list rides", slog.String("error", err.Error()))
		if models.IsUnavailable(err) {
			writeProblem(w, errDatabaseUnavailable())
			return
		}
		writeProblem(w, errInternal())
		return
	}
	writeJSON(w, http.StatusOK, resource.NewRideList(rides, hasMore))
}
