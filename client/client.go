// Package client is the Go client of the Rocket Rides ride API, written the way a mobile app
// should talk to it: one Idempotency-Key per ride, kept across every retry, so that retrying
// can never book or charge twice, and retries only of answers that a retry can change.
package client

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// DefaultBaseURL is where the API listens on its own default port (api.PortDefault), as
// `go run ./cmd/dev` runs it: the client tools' address when API_URL is unset.
const DefaultBaseURL = "http://localhost:5004"

// Defaults for the Client's retry policy.
const (
	// DefaultMaxElapsed bounds how long CreateRide keeps retrying. Past it the client gives up
	// and reports that the outcome is unknown; a later call with the same key finds out.
	DefaultMaxElapsed = 2 * time.Minute

	// DefaultBaseBackoff and DefaultMaxBackoff shape the capped exponential backoff.
	DefaultBaseBackoff = 250 * time.Millisecond
	DefaultMaxBackoff  = 10 * time.Second

	// attemptTimeout bounds one HTTP attempt. The server gives a ride request up to 45 s.
	attemptTimeout = 60 * time.Second
)

// Client calls the ride API as one rider.
type Client struct {
	// BaseURL is the API's base URL, e.g. DefaultBaseURL.
	BaseURL string

	// Token is the rider's API token.
	Token string

	// HTTPClient sends the requests; nil means one with a per-attempt timeout.
	HTTPClient *http.Client

	// MaxElapsed, BaseBackoff and MaxBackoff tune retries; zero means the Default values.
	MaxElapsed  time.Duration
	BaseBackoff time.Duration
	MaxBackoff  time.Duration

	// sleep and now are time.Sleep and time.Now; tests replace them with a fake clock.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
}

// RideParams are a ride request's parameters.
type RideParams struct {
	OriginLat float64 `json:"origin_lat"`
	OriginLon float64 `json:"origin_lon"`
	TargetLat float64 `json:"target_lat"`
	TargetLon float64 `json:"target_lon"`

	// RaiseError asks a server running with SIMULATE_ERRORS to fail after creating the ride,
	// to demonstrate recovery. Other servers refuse it.
	RaiseError bool `json:"raise_error,omitempty"`
}

// Ride is a ride as the API shows it. Encoded as JSON, it is the API's own JSON of the ride:
// the members the API leaves out are left out here too.
type Ride struct {
	// ID is opaque: a string of digits today, and nothing a client should do arithmetic on.
	ID             string     `json:"id"`
	OriginLat      float64    `json:"origin_lat"`
	OriginLon      float64    `json:"origin_lon"`
	TargetLat      float64    `json:"target_lat"`
	TargetLon      float64    `json:"target_lon"`
	StripeChargeID *string    `json:"stripe_charge_id"`
	CreatedAt      time.Time  `json:"created_at"`
	ReceiptSentAt  *time.Time `json:"receipt_sent_at,omitempty"` // nil until the receipt was mailed

	// Status is what became of the ride's charge. Empty in a booking's answer, where the ride
	// is booked.
	Status         RideStatus `json:"status,omitempty"`
	StripeRefundID *string    `json:"stripe_refund_id,omitempty"` // the refund a cancel made
}

// RideStatus is what became of a ride's charge (api/openapi.yaml lists them). A client should
// show a status it does not know as it would show none.
type RideStatus string

// The statuses of a ride.
const (
	RideStatusBooked    RideStatus = "booked"    // charged, or its charge not answered yet
	RideStatusDeclined  RideStatus = "declined"  // the charge was refused: the ride will not happen
	RideStatusCancelled RideStatus = "cancelled" // cancelled by the rider, and refunded
	RideStatusRefunded  RideStatus = "refunded"  // refunded at the payment processor
	RideStatusDisputed  RideStatus = "disputed"  // the rider's bank disputes the charge
)

// RideList is a page of the rider's rides, newest first.
type RideList struct {
	Rides []*Ride `json:"data"`

	// HasMore says whether another page follows: ListRides with StartingAfter set to the last
	// ride's ID reads it.
	HasMore bool `json:"has_more"`
}

// ListParams choose a page of rides: at most Limit (0: the API's default, 10; at most 100),
// after the ride StartingAfter names (empty: from the newest).
type ListParams struct {
	Limit         int
	StartingAfter string
}

// Result is a successfully booked ride.
type Result struct {
	Ride    *Ride
	Message string

	// IdempotencyKey is the key every attempt was sent with.
	IdempotencyKey string

	// Replayed is true when the answer was a stored one: an earlier attempt (ours, or a lost
	// one) had already booked the ride.
	Replayed bool

	// Attempts counts the HTTP attempts made, the successful one included.
	Attempts int
}

// APIError is a definitive error answer: retrying with the same key cannot change it.
type APIError struct {
	StatusCode int
	Code       string `json:"code"`
	Title      string `json:"title"`
	Detail     string `json:"detail"`
	Param      string `json:"param"`

	// DeclineCode is the card issuer's reason for a card_declined (insufficient_funds, say),
	// which an app may show its rider.
	DeclineCode string `json:"decline_code"`

	// Replayed is true when the server returned the error stored for the key.
	Replayed bool
	Attempts int
}

func (e *APIError) Error() string {
	return fmt.Sprintf("rocket rides: %d %s: %s", e.StatusCode, e.Code, e.Detail)
}

// UnknownOutcomeError means the client gave up while the outcome was still open: the ride may
// or may not have been booked. Calling CreateRideWithKey again with IdempotencyKey finds out
// without any risk of booking twice.
type UnknownOutcomeError struct {
	IdempotencyKey string
	Attempts       int
	Last           error // the last attempt's error or retryable answer
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("rocket rides: outcome unknown after %d attempts with key %s (retry with the same key): %s",
		e.Attempts, e.IdempotencyKey, e.Last.Error())
}

func (e *UnknownOutcomeError) Unwrap() error { return e.Last }

// retryableAnswerError is an answer worth retrying (409, 429, 5xx), kept as the last error.
type retryableAnswerError struct {
	status int
	code   string
}

func (e *retryableAnswerError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.status, e.code)
}

// CreateRide books a ride under a fresh random Idempotency-Key (a UUIDv4).
func (c *Client) CreateRide(ctx context.Context, params RideParams) (*Result, error) {
	key, err := NewIdempotencyKey()
	if err != nil {
		return nil, err
	}
	return c.CreateRideWithKey(ctx, key, params)
}

// CreateRideWithKey books a ride under key, retrying network errors, 409, 429 and 5xx answers
// with capped exponential backoff and full jitter, and never waiting less than the server's
// Retry-After. It never retries 400, 401, 402, 413, 415 or 422, which no retry can change, nor
// a stored answer (Idempotent-Replayed: true), which is final. It returns a *Result, an
// *APIError, or, when it gave up before knowing, an *UnknownOutcomeError.
func (c *Client) CreateRideWithKey(ctx context.Context, key string, params RideParams) (*Result, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("error encoding ride params: %w", err)
	}
	return c.send(ctx, "rides", key, body, http.StatusCreated)
}

// CancelRide cancels the rider's ride id and has its charge refunded in full, under a fresh
// random Idempotency-Key.
func (c *Client) CancelRide(ctx context.Context, id string) (*Result, error) {
	key, err := NewIdempotencyKey()
	if err != nil {
		return nil, err
	}
	return c.CancelRideWithKey(ctx, key, id)
}

// CancelRideWithKey cancels ride id under key, retrying as CreateRideWithKey does. A ride that
// cannot be cancelled is an *APIError: 404 not_found, or a 409 ride_already_cancelled,
// ride_already_refunded, ride_disputed or ride_not_charged, which no retry changes.
func (c *Client) CancelRideWithKey(ctx context.Context, key, id string) (*Result, error) {
	return c.send(ctx, "rides/"+url.PathEscape(id)+"/cancel", key, nil, http.StatusOK)
}

// send runs a request under key to its final answer: success, the definitive *APIError, or the
// *UnknownOutcomeError of one given up on.
func (c *Client) send(ctx context.Context, path, key string, body []byte, success int) (*Result, error) {
	var result *Result
	attempts, err := c.retry(ctx, func() (retryAfter time.Duration, err error) {
		result, retryAfter, err = c.attempt(ctx, path, key, body, success)
		return retryAfter, err
	})
	var apiErr *APIError
	switch {
	case err == nil:
		result.Attempts = attempts
		return result, nil
	case errors.As(err, &apiErr):
		return nil, apiErr
	}
	return nil, &UnknownOutcomeError{IdempotencyKey: key, Attempts: attempts, Last: err}
}

// retry runs try until it succeeds or answers a definitive *APIError, waiting between tries
// with capped exponential backoff and full jitter, never less than the server's Retry-After,
// for up to MaxElapsed. It returns how many tries it made and the last one's error (nil on
// success, the *APIError with its Attempts set), or ctx's or the wait's error if they ended it.
func (c *Client) retry(ctx context.Context, try func() (retryAfter time.Duration, err error)) (int, error) {
	deadline := c.clock().Add(valueOr(c.MaxElapsed, DefaultMaxElapsed))
	for attempt := 1; ; attempt++ {
		retryAfter, err := try()
		var apiErr *APIError
		switch {
		case err == nil:
			return attempt, nil
		case errors.As(err, &apiErr):
			apiErr.Attempts = attempt
			return attempt, apiErr
		case ctx.Err() != nil:
			return attempt, ctx.Err()
		}
		wait := max(c.backoff(attempt), retryAfter)
		if c.clock().Add(wait).After(deadline) {
			return attempt, err
		}
		if err := c.wait(ctx, wait); err != nil {
			return attempt, err
		}
	}
}

// GetRide reads one of the rider's rides. Reads change nothing, so network errors, 429 and 5xx
// answers are retried as CreateRideWithKey retries them; any other error answer is an *APIError
// (404 not_found for a ride that is not the rider's).
func (c *Client) GetRide(ctx context.Context, id string) (*Ride, error) {
	var body struct {
		Ride *Ride `json:"ride"`
	}
	if err := c.read(ctx, "rides/"+url.PathEscape(id), nil, &body); err != nil {
		return nil, err
	}
	if body.Ride == nil {
		return nil, errors.New("rocket rides: malformed answer: no ride")
	}
	return body.Ride, nil
}

// ListRides reads a page of the rider's rides, newest first, retrying as GetRide does.
func (c *Client) ListRides(ctx context.Context, params ListParams) (*RideList, error) {
	query := url.Values{}
	if params.Limit > 0 {
		query.Set("limit", strconv.Itoa(params.Limit))
	}
	if params.StartingAfter != "" {
		query.Set("starting_after", params.StartingAfter)
	}
	var list RideList
	if err := c.read(ctx, "rides", query, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// read GETs path with query into out, retrying what a retry may change within MaxElapsed.
func (c *Client) read(ctx context.Context, path string, query url.Values, out any) error {
	endpoint, err := url.JoinPath(c.BaseURL, path)
	if err != nil {
		return &APIError{Code: "invalid_base_url", Detail: err.Error()}
	}
	if len(query) > 0 {
		endpoint += "?" + query.Encode()
	}
	_, err = c.retry(ctx, func() (time.Duration, error) { return c.readOnce(ctx, endpoint, out) })
	return err
}

// readOnce sends one GET. It returns nil with out filled, a definitive *APIError, or a
// retryable error together with the server's Retry-After.
func (c *Client) readOnce(ctx context.Context, endpoint string, out any) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return 0, &APIError{Code: "invalid_request", Detail: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			return 0, fmt.Errorf("malformed 200 answer %q: %w", body, err)
		}
		return 0, nil
	}
	apiErr := &APIError{StatusCode: resp.StatusCode}
	_ = json.Unmarshal(body, apiErr)
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return 0, apiErr
	}
	return retryAfter(resp.Header.Get("Retry-After")), &retryableAnswerError{status: resp.StatusCode, code: apiErr.Code}
}

// finalConflicts are the 409s a cancel stores on its key: final, as a replay of them is.
var finalConflicts = []string{"ride_already_cancelled", "ride_already_refunded", "ride_disputed", "ride_not_charged"}

// attempt sends one request to path. It returns a result (an answer of status success), or a
// definitive *APIError, or a retryable error together with the server's Retry-After.
func (c *Client) attempt(ctx context.Context, path, key string, body []byte, success int) (*Result, time.Duration, error) {
	endpoint, err := url.JoinPath(c.BaseURL, path)
	if err != nil {
		return nil, 0, &APIError{Code: "invalid_base_url", Detail: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, 0, &APIError{Code: "invalid_request", Detail: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Idempotency-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}

	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, 0, err // network error, timeout: the request may or may not have arrived
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, err // the answer was lost on the way
	}
	replayed := resp.Header.Get("Idempotent-Replayed") == "true"

	if resp.StatusCode == success {
		var answer struct {
			Message string `json:"message"`
			Ride    *Ride  `json:"ride"`
		}
		if err := json.Unmarshal(respBody, &answer); err != nil || answer.Ride == nil {
			return nil, 0, fmt.Errorf("malformed %d answer %q", success, respBody)
		}
		return &Result{Ride: answer.Ride, Message: answer.Message, IdempotencyKey: key, Replayed: replayed}, 0, nil
	}

	apiErr := &APIError{StatusCode: resp.StatusCode, Replayed: replayed}
	_ = json.Unmarshal(respBody, apiErr) // a body that is no problem document leaves the fields empty
	if replayed || !retryable(resp.StatusCode) || apiErr.Code == "payment_needs_review" || slices.Contains(finalConflicts, apiErr.Code) {
		return nil, 0, apiErr
	}
	return nil, retryAfter(resp.Header.Get("Retry-After")), &retryableAnswerError{status: resp.StatusCode, code: apiErr.Code}
}

// retryable reports whether an answer with status may change on a retry with the same key.
func retryable(status int) bool {
	return status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500
}

// retryAfter parses a Retry-After header given in seconds; an HTTP date or nonsense is ignored.
func retryAfter(header string) time.Duration {
	seconds, err := strconv.Atoi(header)
	if err != nil || seconds < 0 {
		return 0
	}
	return time.Duration(seconds) * time.Second
}

// backoff is full jitter over a capped exponential: a random wait in [0, min(max, base*2^n)),
// which spreads many clients retrying after one outage instead of having them retry in step.
func (c *Client) backoff(attempt int) time.Duration {
	base, ceiling := valueOr(c.BaseBackoff, DefaultBaseBackoff), valueOr(c.MaxBackoff, DefaultMaxBackoff)
	upper := ceiling
	if attempt < 30 {
		upper = min(ceiling, base<<(attempt-1))
	}
	return rand.N(upper) + 1
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return &http.Client{Timeout: attemptTimeout}
}

func valueOr(d, fallback time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return fallback
}

// NewIdempotencyKey returns a random UUIDv4, the recommended Idempotency-Key.
func NewIdempotencyKey() (string, error) {
	var b [16]byte
	if _, err := cryptorand.Read(b[:]); err != nil {
		return "", fmt.Errorf("error reading random bytes: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
