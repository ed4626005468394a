package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// How long clients are told to wait before retrying. An in-use key usually frees up as soon as
// the request holding it finishes, in well under a second; a payment processor outage takes
// longer to pass.
const (
	retryAfterInUse              = 1 * time.Second
	retryAfterPaymentUnavailable = 5 * time.Second
)

// apiError is a problem to answer with, plus the Retry-After to send with it, if any.
type apiError struct {
	problem    *problem.Problem
	retryAfter time.Duration
}

func newError(status int, code problem.Code, title, detail string) *apiError {
	return &apiError{problem: problem.New(status, code, title, detail)}
}

// withRetryAfter has e sent with a Retry-After of wait.
func (e *apiError) withRetryAfter(wait time.Duration) *apiError {
	e.retryAfter = wait
	return e
}

func errInvalidParameter(param, detail string) *apiError {
	e := newError(http.StatusBadRequest, problem.CodeInvalidParameter, "Invalid parameter", detail)
	e.problem.Param = param
	return e
}

func errNotFound(detail string) *apiError {
	return newError(http.StatusNotFound, problem.CodeNotFound, "Not found", detail)
}

func errMethodNotAllowed(method string) *apiError {
	return newError(http.StatusMethodNotAllowed, problem.CodeMethodNotAllowed, "Method not allowed",
		fmt.Sprintf("%s is not allowed on this route.", method))
}

func errUnauthorized(detail string) *apiError {
	return newError(http.StatusUnauthorized, problem.CodeUnauthorized, "Unauthorized", detail)
}

func errInternal() *apiError {
	return newError(http.StatusInternalServerError, problem.CodeInternalError, "Internal error",
		"Something went wrong on our side. Retry the request with the same Idempotency-Key; it resumes where it stopped.")
}

func errDatabaseUnavailable() *apiError {
	return newError(http.StatusServiceUnavailable, problem.CodeServiceUnavailable, "Service unavailable",
		"The database cannot be reached right now. Retry with the same Idempotency-Key; the request resumes where it stopped.").withRetryAfter(retryAfterInUse)
}

func errShuttingDown() *apiError {
	return newError(http.StatusServiceUnavailable, problem.CodeServiceUnavailable, "Service unavailable",
		"The server is restarting and stopped this request. Retry it with the same Idempotency-Key; it resumes where it stopped.").withRetryAfter(retryAfterInUse)
}

// errFromPhases maps what the phases returned to the answer a client gets. None of these is
// stored on the key: each is the answer to this attempt only.
func errFromPhases(err error) *apiError {
	var spent *budgetSpentError
	switch {
	case errors.As(err, &spent):
		return spent.apiErr
	case errors.Is(err, phases.ErrParamsMismatch):
		return newError(http.StatusUnprocessableEntity, problem.CodeIdempotencyKeyReused, "Idempotency key reused",
			"This Idempotency-Key was already used with different parameters. Use a new key for a new ride.")
	case errors.Is(err, phases.ErrKeyInUse), errors.Is(err, phases.ErrLockLost):
		return newError(http.StatusConflict, problem.CodeIdempotencyKeyInUse, "Idempotency key in use",
			"Another request with this Idempotency-Key is in progress. Retry shortly with the same key.").withRetryAfter(retryAfterInUse)
	case errors.Is(err, phases.ErrConflict):
		// Not the key's fault: the database kept aborting the request's transaction in favour of
		// concurrent ones, for all of the retry budget. Nothing of it was lost.
		return newError(http.StatusConflict, problem.CodeRequestConflict, "Request conflicted",
			"The request kept conflicting with concurrent requests. Retry shortly with the same Idempotency-Key.").withRetryAfter(retryAfterInUse)
	case errors.Is(err, phases.ErrRideBookingInProgress):
		return newError(http.StatusConflict, problem.CodeRequestConflict, "Ride booking in progress",
			"The ride is still being booked and charged. Retry the cancel shortly with the same Idempotency-Key.").withRetryAfter(retryAfterInUse)
	case errors.Is(err, phases.ErrSimulationDisabled):
		return errInvalidParameter("raise_error", "raise_error is only accepted when the server runs with SIMULATE_ERRORS=true.")
	case errors.As(err, new(*phases.PaymentUnavailableError)):
		return newError(http.StatusServiceUnavailable, problem.CodePaymentProcessorUnavailable, "Payment processor unavailable",
			"The payment processor could not be reached. Retry with the same Idempotency-Key; you will not be charged twice.").withRetryAfter(retryAfterPaymentUnavailable)
	// After the Stripe case: an unreachable Stripe looks like a network error too. A commit
	// whose outcome is unknown is the database's failure, not ours: the retry finds out.
	case errors.Is(err, phases.ErrCommitOutcomeUnknown), models.IsUnavailable(err):
		return errDatabaseUnavailable()
	default:
		return errInternal()
	}
}

// writeProblem sends e as an application/problem+json response, with the request's id.
func writeProblem(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(e.retryAfter))
	}
	if e.problem.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rocket-rides"`)
	}
	writeProblemDocument(w, e.problem.Status, *e.problem)
}

// retryAfterSeconds is wait as Retry-After's whole seconds, rounded up: rounded down, a wait
// under a second would tell the client to retry at once, into the very limit it hit.
func retryAfterSeconds(wait time.Duration) string {
	return strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
}

// writeStoredProblem sends a problem that the phases stored on the key to finish the request (a
// declined card, say), whether to the request that finished it or to a replay. The stored
// document has no request id (phases.Response drops any, since one document answers many
// requests); it gets the id of the request being answered, so that the id a client quotes is
// the one our log of its request carries, not that of some earlier attempt. Everything else is
// served as stored. It returns the problem's code, for the metrics; empty if stored is not one.
func writeStoredProblem(w http.ResponseWriter, status int, stored []byte) problem.Code {
	var p problem.Problem
	if err := json.Unmarshal(stored, &p); err != nil {
		// Not a document this API stores; a replay must answer all the same, so it goes out as
		// it was stored.
		writeBody(w, status, problem.ContentType, stored)
		return ""
	}
	writeProblemDocument(w, status, p)
	return p.Code
}

// writeProblemDocument sends p with status, and with the request id that assignRequestID set on
// the response. The id is taken from there rather than from the request's context, so that the
// id in a body cannot differ from the X-Request-Id of the response that carries it, and every
// writer of a problem, which already has the ResponseWriter, needs nothing more.
func writeProblemDocument(w http.ResponseWriter, status int, p problem.Problem) {
	p.RequestID = w.Header().Get(requestIDHeader)
	body, _ := json.Marshal(&p) // a Problem always encodes
	writeBody(w, status, problem.ContentType, body)
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, errInternal())
		return
	}
	writeBody(w, status, jsonContentType, body)
}

// jsonContentType is the media type of every answer of this API but a problem and the contract.
const jsonContentType = "application/json"

// writeBody sends body with status. Every answer of this API is about one rider and one moment:
// no cache may keep it (a replay comes from the idempotency key, never from a cache), and no
// browser may read it as anything but its declared type.
//
// A JSON body goes out ending in a newline, so that `curl -i` leaves the prompt on a line of its
// own. The newline is added here, on every write, and never stored: a stored answer, however
// old, replays through here byte for byte as it first went out.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	if contentType == jsonContentType || contentType == problem.ContentType {
		// A full slice expression, so that append copies: body may be a stored answer.
		body = append(body[:len(body):len(body)], '\n')
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that went away cannot be told anything
}
