// Package problem is the error body of the HTTP API: an RFC 9457 problem document with a stable
// machine-readable code. It is shared by the api package, which answers most errors, and the
// phases package, which stores the errors that finish a request (a declined card, say) so that
// a replay returns the very same document.
package problem

import "fmt"

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// typeBase is the prefix of every problem type URI. It need not resolve; it only has to be
// stable and unique to this API.
const typeBase = "https://rocketrides.example/problems/"

// Code is a stable, machine-readable error identifier. Clients branch on it, never on Title or
// Detail, which are for people and may change.
type Code string

// The codes this API answers with.
const (
	CodeBookingRateLimited          Code = "booking_rate_limited"
	CodeCancelRateLimited           Code = "cancel_rate_limited"
	CodeCardDeclined                Code = "card_declined"
	CodeDuplicateHeader             Code = "duplicate_header"
	CodeIdempotencyKeyInUse         Code = "idempotency_key_in_use"
	CodeIdempotencyKeyInvalid       Code = "idempotency_key_invalid"
	CodeIdempotencyKeyMissing       Code = "idempotency_key_missing"
	CodeIdempotencyKeyReused        Code = "idempotency_key_reused"
	CodeInternalError               Code = "internal_error"
	CodeInvalidParameter            Code = "invalid_parameter"
	CodeMethodNotAllowed            Code = "method_not_allowed"
	CodeNotFound                    Code = "not_found"
	CodePaymentNeedsReview          Code = "payment_needs_review"
	CodePaymentProcessorUnavailable Code = "payment_processor_unavailable"
	CodePaymentRejected             Code = "payment_rejected"
	CodeReadRateLimited             Code = "read_rate_limited"
	CodeRideAlreadyCancelled        Code = "ride_already_cancelled"
	CodeRideAlreadyRefunded         Code = "ride_already_refunded"
	CodeRideDisputed                Code = "ride_disputed"
	CodeRideNotCharged              Code = "ride_not_charged"
	CodeRequestConflict             Code = "request_conflict"
	CodeRequestRateLimited          Code = "request_rate_limited"
	CodeRequestTooLarge             Code = "request_too_large"
	CodeServiceUnavailable          Code = "service_unavailable"
	CodeUnauthorized                Code = "unauthorized"
	CodeUnsupportedMediaType        Code = "unsupported_media_type"
	CodeWebhookEventInvalid         Code = "webhook_event_invalid"
	CodeWebhookSignatureInvalid     Code = "webhook_signature_invalid"
)

// Problem is an RFC 9457 problem document extended with Code, for parameter errors Param, for
// a declined card the issuer's DeclineCode, and the id of the request it answers.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   Code   `json:"code"`
	Param  string `json:"param,omitempty"`

	// DeclineCode is the card issuer's reason for a card_declined, as Stripe gives it
	// ("insufficient_funds"), for a client to tailor its message to the rider. Stripe documents
	// it for end users; none of Stripe's other error fields reaches a client.
	DeclineCode string `json:"decline_code,omitempty"`

	// RequestID is the id of the HTTP request this document answers (its X-Request-Id), for a
	// client to quote when it reports the error; the API sets it as it writes the document. A
	// stored problem has none: it answers many requests, its first and every replay, and each
	// answer gets the id of its own request.
	RequestID string `json:"request_id,omitempty"`
}

// New builds a problem. Title is the short, fixed summary of code; detail says what happened
// in this request.
func New(status int, code Code, title, detail string) *Problem {
	return &Problem{
		Type:   typeBase + string(code),
		Title:  title,
		Status: status,
		Detail: detail,
		Code:   code,
	}
}

// Newf is New with a formatted detail.
func Newf(status int, code Code, title, format string, args ...any) *Problem {
	return New(status, code, title, fmt.Sprintf(format, args...))
}
