package fakestripe

import (
	"fmt"
	"net/http"
)

// RefusalError is why RefundCharge or DisputeCharge did nothing, in Stripe's words.
type RefusalError struct {
	// Code is Stripe's error code: "resource_missing" for a charge the stand-in does not hold,
	// "charge_already_refunded", "charge_disputed" (disputed already, which also forbids a
	// refund), or empty when Stripe gives none (a charge that did not succeed).
	Code string

	// Message is Stripe's message, e.g. "Charge ch_... has already been refunded."
	Message string
}

func (e *RefusalError) Error() string {
	if e.Code == "" {
		return "refused: " + e.Message
	}
	return fmt.Sprintf("refused (%s): %s", e.Code, e.Message)
}

// status is the control API's HTTP status for the refusal: 404 for a charge it does not hold,
// 409 for one whose state forbids the action.
func (e *RefusalError) status() int {
	if e.Code == "resource_missing" {
		return http.StatusNotFound
	}
	return http.StatusConflict
}

func refusal(e *apiError) *RefusalError {
	return &RefusalError{Code: e.Code, Message: e.Message}
}

// RefundCharge refunds what is left of the charge id, as a user of Stripe's dashboard would: under
// the rules of POST /v1/refunds, with no reason and no idempotency key, emitting charge.refunded.
// A refusal is a *RefusalError; an error keeping the refund in the journal (see Open) is returned
// too, though the refund stands in memory as an API refund's would.
func (s *Server) RefundCharge(id string) (*Refund, error) {
	s.mu.Lock()
	rf, e := s.refundInFull(id)
	s.mu.Unlock()
	if e != nil {
		return nil, refusal(e)
	}
	if err := s.recordEntry(&journalEntry{Refund: rf}); err != nil {
		return nil, fmt.Errorf("error recording refund %s: %w", rf.ID, err)
	}
	out := *rf
	return &out, nil
}

// refundInFull refunds what is left of the charge id. The caller holds s.mu.
func (s *Server) refundInFull(id string) (*Refund, *apiError) {
	ch, ok := s.chargesByID[id]
	if !ok {
		return nil, noSuchResource(http.StatusNotFound, "charge", "id", id)
	}
	amount, e := refundableAmount(ch, 0, false)
	if e != nil {
		return nil, e
	}
	rf := newRefund(ch, amount, "", map[string]string{}, "")
	s.applyRefund(rf)
	s.emit(EventChargeRefunded, s.chargeEventObject(ch), nil)
	return rf, nil
}

// DisputeCharge opens a dispute of the charge id, as the rider's bank would, for all of it that is
// not refunded, with reason "fraudulent", and emits charge.dispute.created. The charge shows
// disputed from then on and can no longer be refunded (charge_disputed). A refusal is a
// *RefusalError; an error keeping the dispute in the journal is returned as RefundCharge's is.
func (s *Server) DisputeCharge(id string) (*Dispute, error) {
	s.mu.Lock()
	dp, e := s.openDispute(id)
	s.mu.Unlock()
	if e != nil {
		return nil, refusal(e)
	}
	if err := s.recordEntry(&journalEntry{Dispute: dp}); err != nil {
		return nil, fmt.Errorf("error recording dispute %s: %w", dp.ID, err)
	}
	out := *dp
	return &out, nil
}
