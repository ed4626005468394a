package invariants

import "encoding/json"

// Observed is what was seen outside the database: Stripe's charges and refunds, what the
// clients were told, the mail that went out, and what Stripe told the webhook endpoint. The
// checker holds the database to account against it, since a database that agrees with itself
// can still disagree with the world.
type Observed struct {
	// Charges is every charge Stripe holds (GET /_fakestripe/charges of the stand-in), failed
	// ones included. Nil means Stripe holds none.
	Charges []Charge

	// Refunds is every refund Stripe holds (GET /_fakestripe/refunds of the stand-in): our
	// cancels' and the dashboard's. Nil means Stripe holds none.
	Refunds []Refund

	// DashboardRefunds are the ids of the refunds the run itself made from Stripe's dashboard
	// (the stand-in's POST /_fakestripe/charges/{id}/refund): no cancel made them, so no ride
	// records them, and the rides they refund learn of them by webhook only.
	DashboardRefunds []string

	// Webhooks, when set, is what Stripe emitted for the webhook endpoint, taken once every
	// delivery was made: the checker then holds every ride to the refund or dispute Stripe shows
	// for its charge, and stripe_events to the events. Nil (no webhook endpoint, or deliveries
	// still pending) checks only that no ride claims a refund or dispute Stripe does not show.
	Webhooks *Webhooks

	// Outcomes is every answer a client call ended with, in any order; several calls with one
	// key (a double tap, a retry after giving up) each add one.
	Outcomes []ClientOutcome

	// Mailbox, when set, is every message the mail server accepted, and receipts are checked
	// against it email by email. Nil checks only what the database recorded.
	Mailbox *Mailbox
}

// Charge is Stripe's record of one charge, with the JSON names of the stand-in's control API
// (fakestripe.Charge), so that its answer decodes straight into it.
type Charge struct {
	ID             string            `json:"id"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Customer       string            `json:"customer"`
	Status         string            `json:"status"` // "succeeded" or "failed"
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`

	// AmountRefunded is what refunds gave back of Amount; Refunded, whether all of it.
	AmountRefunded int64 `json:"amount_refunded"`
	Refunded       bool  `json:"refunded"`

	// Disputed is whether the rider's bank disputed the charge.
	Disputed bool `json:"disputed"`
}

// ChargeStatusSucceeded is the status of a charge that took the rider's money, and of a refund
// that gave it back.
const ChargeStatusSucceeded = "succeeded"

// Refund is Stripe's record of one refund, with the JSON names of the stand-in's control API
// (fakestripe.Refund).
type Refund struct {
	ID       string `json:"id"`
	Charge   string `json:"charge"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"` // "succeeded"

	// IdempotencyKey is the Stripe idempotency key of the request that made the refund: a
	// cancel's, or empty for the dashboard's.
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
}

// Webhooks is Stripe's side of the webhook endpoint.
type Webhooks struct {
	// Events is every event Stripe emitted, each the Stripe Event object it delivered (the
	// "events" of the stand-in's GET /_fakestripe/webhooks), in any order.
	Events []json.RawMessage
}

// OutcomeKind is how a client call ended, in the terms of package client.
type OutcomeKind string

// The ways a client call can end: with what it asked for, a booking or a cancel, with a final
// refusal, or unknown. There is deliberately nothing else: a client that cannot tell must say
// unknown, never guess.
const (
	// OutcomeCreated is a 201 with a ride (client.Result), fresh or replayed.
	OutcomeCreated OutcomeKind = "created"

	// OutcomeCancelled is a cancel's 200 with the cancelled ride and its refund (client.Result
	// of CancelRide), fresh or replayed.
	OutcomeCancelled OutcomeKind = "cancelled"

	// OutcomeRefused is a definitive error answer (client.APIError): a declined card's 402, a
	// stored 500 payment_needs_review, a cancel's 404 or 409 (ride_already_cancelled, ...), a
	// 4xx no retry can change.
	OutcomeRefused OutcomeKind = "refused"

	// OutcomeUnknown is a client that gave up before it knew (client.UnknownOutcomeError): honest,
	// and always acceptable, whatever the database says.
	OutcomeUnknown OutcomeKind = "unknown"
)

// ClientOutcome is what one client call with one Idempotency-Key ended with.
type ClientOutcome struct {
	UserID         int64
	IdempotencyKey string
	Kind           OutcomeKind

	// RideID and ChargeID are the ride a created or cancelled outcome returned and its charge;
	// RefundID, a cancelled outcome's refund.
	RideID   int64
	ChargeID string
	RefundID string

	// StatusCode and Code are a refused outcome's status and problem code.
	StatusCode int
	Code       string
}

// Mailbox is the mail server's side of receipts.
type Mailbox struct {
	Emails []Email

	// StrictDuplicates makes a second delivery of one receipt (same Message-ID) a violation.
	// Receipts are sent at least once by design: a worker that loses the database after the
	// mail server accepted a receipt and before recording it sends it again, with the same
	// Message-ID so that the rider's mail system can fold the copies. Without StrictDuplicates
	// such copies are counted in Report.DuplicateEmails, not reported as violations.
	StrictDuplicates bool
}

// Email is one message the mail server accepted.
type Email struct {
	MessageID string   // the Message-ID header, angle brackets included
	To        []string // the envelope recipients
}
