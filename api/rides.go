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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// handleCreateRide is POST /rides: book a ride and charge for it, exactly once per
// Idempotency-Key. Every answer is counted in rocketrides_ride_requests_total by its outcome.
func (s *Server) handleCreateRide(w http.ResponseWriter, r *http.Request) {
	s.serveKeyed(w, r, s.limiter.bookings, s.metrics.RideRequests, rideOutcome,
		func(ctx context.Context, keyed phases.KeyedRequest, body []byte) (*phases.Outcome, *apiError) {
			params, raiseError, apiErr := parseRideParams(r.Header.Get("Content-Type"), body)
			if apiErr != nil {
				return nil, apiErr
			}
			outcome, err := s.executor.CreateRide(ctx, &phases.CreateRideRequest{KeyedRequest: keyed, Params: params, RaiseError: raiseError})
			return outcome, s.errFromRun(ctx, r, "ride request", err)
		})
}

// serveKeyed serves a request that runs through the phases under an Idempotency-Key (a booking,
// a cancel). It reads the key and the body, and hands them to run with a context detached from
// the client's connection: a client that hangs up mid-request would otherwise abort a phase
// halfway, which is safe but wasteful. The executor bounds the work
// (phases.Config.RequestTimeout), and shutdown cancels it. A new key spends the rider's budget
// (see admitNewKey). The answer is written, and counted in series by its outcome as outcomeOf
// names it.
func (s *Server) serveKeyed(w http.ResponseWriter, r *http.Request, budget *riderBudget, series *prometheus.CounterVec,
	outcomeOf func(status int, code problem.Code, replayed bool) string,
	run func(ctx context.Context, keyed phases.KeyedRequest, body []byte) (*phases.Outcome, *apiError)) {
	var outcome *phases.Outcome
	key, body, apiErr := keyAndBody(w, r)
	if apiErr == nil {
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		defer context.AfterFunc(s.workCtx, cancel)()
		user := userFrom(r.Context())
		tracing.SetKey(r.Context(), user.ID, key)
		outcome, apiErr = run(ctx, phases.KeyedRequest{
			User:           user,
			IdempotencyKey: key,
			OriginIP:       clientAddr(r, s.trustedProxies),
			AdmitNewKey:    s.admitNewKey(budget, user.ID),
		}, body)
	}
	series.WithLabelValues(writeAnswer(w, outcome, apiErr, outcomeOf)).Inc()
}

// writeAnswer sends a request's stored outcome, marked as a replay when it is one, or, when it
// has none, apiErr. It returns the answer's name for the metrics, as outcomeOf names it.
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
	// The charge's outcomes, which the metric names by the code the rider got.
	case problem.CodeCardDeclined, problem.CodePaymentRejected, problem.CodePaymentProcessorUnavailable, problem.CodePaymentNeedsReview:
		return string(code)
	case problem.CodeIdempotencyKeyInUse:
		return metrics.RideKeyInUse
	case problem.CodeIdempotencyKeyReused:
		return metrics.RideKeyReused
	case problem.CodeRequestConflict:
		return metrics.RideConflict
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

// keyAndBody reads what every request run through the phases carries: its Idempotency-Key and
// its body.
func keyAndBody(w http.ResponseWriter, r *http.Request) (string, []byte, *apiError) {
	key, apiErr := idempotencyKeyFrom(r.Header)
	if apiErr != nil {
		return "", nil, apiErr
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		return "", nil, newError(http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge, "Request too large",
			"The request body must be at most 64 KiB.")
	case err != nil:
		return "", nil, errInvalidParameter("", "The request body could not be read.")
	}
	return key, body, nil
}

// errFromRun maps the error of a request run through the phases to the answer the client
// gets, and logs what is the server's fault. It returns nil for no error.
func (s *Server) errFromRun(ctx context.Context, r *http.Request, what string, err error) *apiError {
	switch {
	case err == nil:
		return nil
	case s.workCtx.Err() != nil:
		return errShuttingDown()
	}
	apiErr := errFromPhases(err)
	if apiErr.problem.Status >= 500 {
		s.logger.ErrorContext(ctx, "API: "+what+" failed",
			slog.Int64("user_id", userFrom(r.Context()).ID), slog.String("error", err.Error()))
	}
	return apiErr
}

// handleCancelRide is POST /rides/{id}/cancel: refund one of the caller's own charged rides,
// exactly once per Idempotency-Key, and at most once per ride. It takes no parameters but the
// ride in the path. Every answer is counted in rocketrides_cancel_requests_total by its
// outcome.
func (s *Server) handleCancelRide(w http.ResponseWriter, r *http.Request) {
	s.serveKeyed(w, r, s.limiter.cancels, s.metrics.CancelRequests, cancelOutcome,
		func(ctx context.Context, keyed phases.KeyedRequest, body []byte) (*phases.Outcome, *apiError) {
			// A ride id that is no number names no ride. Like any unknown ride, that is a 404,
			// but not one stored on a key.
			id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
			if err != nil || id < 1 {
				return nil, errNotFound("No such ride.")
			}
			if apiErr := noCancelParams(r.Header.Get("Content-Type"), body); apiErr != nil {
				return nil, apiErr
			}
			outcome, err := s.executor.CancelRide(ctx, &phases.CancelRideRequest{KeyedRequest: keyed, RideID: id})
			return outcome, s.errFromRun(ctx, r, "cancel", err)
		})
}

// noCancelParams refuses a cancel's body that holds any parameter: a cancel takes none.
func noCancelParams(contentType string, body []byte) *apiError {
	raw, apiErr := decodeRideParams(contentType, body)
	if apiErr != nil {
		return apiErr
	}
	for name := range raw {
		return errInvalidParameter(name, "A cancel takes no parameters; "+name+" is not one.")
	}
	return nil
}

// handleGetRide is GET /rides/{id}: one of the caller's own rides. Anyone else's is a 404, so that
// ride ids reveal nothing.
func (s *Server) handleGetRide(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		writeProblem(w, errNotFound("No such ride."))
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
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

// handleListRides is GET /rides: the caller's rides, newest first, a page at a time. A page ends
// where limit says; has_more tells whether another follows, which starting_after (the last
// ride's id) asks for.
func (s *Server) handleListRides(w http.ResponseWriter, r *http.Request) {
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

	ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
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
