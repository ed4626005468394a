package invariants

// Observed is what was seen outside the database: Stripe's charges, what the clients were told,
// and the mail that went out. The checker holds the database to account against it, since a
// database that agrees with itself can still disagree with the world.
type Observed struct {
	// Charges is every charge Stripe holds (GET /_fakestripe/charges of the stand-in), failed
	// ones included. Nil means Stripe holds none.
	Charges []Charge

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
}

// ChargeStatusSucceeded is the status of a charge that took the rider's money.
const ChargeStatusSucceeded = "succeeded"

// OutcomeKind is how a client call ended, in the terms of package client.
type OutcomeKind string

// The three ways a client call can end. There is deliberately no fourth: a client that cannot
// tell must say unknown, never guess.
const (
	// OutcomeCreated is a 201 with a ride (client.Result), fresh or replayed.
	OutcomeCreated OutcomeKind = "created"

	// OutcomeRefused is a definitive error answer (client.APIError): a declined card's 402, a
	// stored 500 payment_needs_review, a 4xx no retry can change.
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

	// RideID and ChargeID are the ride a created outcome returned and its charge.
	RideID   int64
	ChargeID string

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
