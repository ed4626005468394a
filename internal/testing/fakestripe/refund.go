package fakestripe

import (
	"fmt"
	"net/http"
	"time"
)

// Refund is the stand-in's record of one refund of a charge, in whole or in part.
type Refund struct {
	ID       string            `json:"id"`
	Charge   string            `json:"charge"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Reason   string            `json:"reason,omitempty"`
	Metadata map[string]string `json:"metadata"`
	Status   string            `json:"status"` // always "succeeded": card refunds do not fail here
	Created  time.Time         `json:"created"`

	// IdempotencyKey is the Idempotency-Key of the request that made the refund, empty if it
	// had none.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// refundCreateParams are the parameters Stripe's POST /v1/refunds takes. A refund of a payment
// intent is not modelled: the stand-in has charges only.
var refundCreateParams = []string{
	"amount", "charge", "expand", "instructions_email", "metadata", "payment_intent", "reason",
	"refund_application_fee", "reverse_transfer",
}

// refundReasons are the reasons Stripe takes.
var refundReasons = map[string]bool{"duplicate": true, "fraudulent": true, "requested_by_customer": true}

// createRefund refunds a succeeded charge, by default whatever of it is not refunded yet, under
// the rules of refundableAmount, and emits charge.refunded; with an Idempotency-Key, a retry gets
// the first refund again.
func (s *Server) createRefund(req *apiRequest) result {
	p := req.params
	if e := checkParams(p, refundCreateParams); e != nil {
		return rejected(e)
	}
	chargeID := p.Get("charge")
	if p.Get("payment_intent") != "" {
		return rejected(invalidRequest("", "payment_intent", "The stand-in refunds charges only: pass charge."))
	}
	if chargeID == "" {
		return rejected(invalidRequest("parameter_missing", "charge", "One of the following params should be provided for this request: payment_intent or charge."))
	}
	amount, amountGiven, e := intParam(p, "amount")
	if e != nil {
		return rejected(e)
	}
	if amountGiven && amount < 1 {
		return rejected(invalidRequest("", "amount", "This value must be greater than or equal to 1."))
	}
	reason := p.Get("reason")
	if reason != "" && !refundReasons[reason] {
		return rejected(invalidRequest("", "reason", fmt.Sprintf("Invalid reason: must be one of duplicate, fraudulent or requested_by_customer. Got %q.", reason)))
	}
	if req.r.Context().Value(failExecutingKey{}) != nil {
		return failedExecuting(internalError())
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.chargesByID[chargeID]
	if !ok {
		return rejected(noSuchResource(http.StatusBadRequest, "charge", "charge", chargeID))
	}
	amount, e = refundableAmount(ch, amount, amountGiven)
	if e != nil {
		return rejected(e)
	}
	rf := newRefund(ch, amount, reason, metadataParam(p), req.idempotencyKey)
	s.applyRefund(rf)
	s.emit(EventChargeRefunded, s.chargeEventObject(ch), req)
	req.changes.Refund = rf
	return succeeded(rf.object())
}

// refundableAmount is what a refund of ch takes: amount if given, else all that is left. Like
// Stripe, it refuses a charge that did not succeed, one charged back by a dispute
// (charge_disputed), one refunded in full already (charge_already_refunded) and an amount past
// what is left. The caller holds s.mu.
func refundableAmount(ch *Charge, amount int64, amountGiven bool) (int64, *apiError) {
	left := ch.Amount - ch.AmountRefunded
	switch {
	case ch.Status != ChargeStatusSucceeded:
		return 0, invalidRequest("", "charge", fmt.Sprintf("Charge %s has not succeeded, so it cannot be refunded.", ch.ID))
	case ch.Disputed:
		return 0, invalidRequest("charge_disputed", "charge", fmt.Sprintf("Charge %s has been charged back; cannot issue a refund.", ch.ID))
	case left == 0:
		return 0, invalidRequest("charge_already_refunded", "charge", fmt.Sprintf("Charge %s has already been refunded.", ch.ID))
	case !amountGiven:
		return left, nil
	case amount > left:
		return 0, invalidRequest("", "amount", fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d).", amount, left))
	}
	return amount, nil
}

// newRefund makes a succeeded refund of amount of ch.
func newRefund(ch *Charge, amount int64, reason string, metadata map[string]string, idempotencyKey string) *Refund {
	return &Refund{
		ID:             newID("re_"),
		Charge:         ch.ID,
		Amount:         amount,
		Currency:       ch.Currency,
		Reason:         reason,
		Metadata:       metadata,
		Status:         "succeeded",
		Created:        time.Now(),
		IdempotencyKey: idempotencyKey,
	}
}

// applyRefund records rf and takes its amount off its charge. The caller holds s.mu.
func (s *Server) applyRefund(rf *Refund) {
	s.refunds = append(s.refunds, rf)
	s.refundsByID[rf.ID] = rf
	if ch := s.chargesByID[rf.Charge]; ch != nil {
		ch.AmountRefunded += rf.Amount
		ch.Refunded = ch.AmountRefunded == ch.Amount
	}
}

func (s *Server) retrieveRefund(req *apiRequest) result {
	id := req.r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rf, ok := s.refundsByID[id]
	if !ok {
		return rejected(noSuchResource(http.StatusNotFound, "refund", "id", id))
	}
	return succeeded(rf.object())
}

// Refunds returns every refund Stripe holds, oldest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, len(s.refunds))
	for i, rf := range s.refunds {
		out[i] = *rf
	}
	return out
}

// refundObject is a refund on the wire.
type refundObject struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Amount   int64             `json:"amount"`
	Charge   string            `json:"charge"`
	Created  int64             `json:"created"`
	Currency string            `json:"currency"`
	Metadata map[string]string `json:"metadata"`
	Reason   *string           `json:"reason"`
	Status   string            `json:"status"`
}

func (rf *Refund) object() refundObject {
	return refundObject{
		ID: rf.ID, Object: "refund", Amount: rf.Amount, Charge: rf.Charge, Created: rf.Created.Unix(),
		Currency: rf.Currency, Metadata: rf.Metadata, Reason: nullable(rf.Reason), Status: rf.Status,
	}
}

// refundListObject is Stripe's list of a charge's refunds, newest first.
type refundListObject struct {
	Object     string         `json:"object"`
	Data       []refundObject `json:"data"`
	HasMore    bool           `json:"has_more"`
	TotalCount int            `json:"total_count"`
	URL        string         `json:"url"`
}
