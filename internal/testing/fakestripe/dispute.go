package fakestripe

import (
	"fmt"
	"net/http"
	"time"
)

// Dispute is the stand-in's record of a rider's bank disputing a charge: a chargeback, which
// takes the charge's money back until the dispute is settled. Disputes are opened by
// DisputeCharge only, as a bank would, and stay at status "needs_response": the stand-in takes
// no evidence and settles nothing.
type Dispute struct {
	ID       string    `json:"id"`
	Charge   string    `json:"charge"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	Reason   string    `json:"reason"` // Stripe's dispute reason, e.g. "fraudulent"
	Status   string    `json:"status"` // always "needs_response"
	Created  time.Time `json:"created"`
}

// Stripe's dispute reason and status that the stand-in produces.
const (
	DisputeReasonFraudulent    = "fraudulent"
	DisputeStatusNeedsResponse = "needs_response"
)

// disputeResponseWindow is how long Stripe gives an account to answer a dispute with evidence.
const disputeResponseWindow = 7 * 24 * time.Hour

// openDispute disputes the charge id for all that is not refunded of it, as a rider's bank would,
// and emits charge.dispute.created. It refuses a charge it does not hold, one that did not
// succeed, one refunded in full and one disputed already. The caller holds s.mu.
func (s *Server) openDispute(id string) (*Dispute, *apiError) {
	ch, ok := s.chargesByID[id]
	if !ok {
		return nil, noSuchResource(http.StatusNotFound, "charge", "id", id)
	}
	switch {
	case ch.Status != ChargeStatusSucceeded:
		return nil, invalidRequest("", "charge", fmt.Sprintf("Charge %s has not succeeded, so it cannot be disputed.", ch.ID))
	case ch.Disputed:
		return nil, invalidRequest("charge_disputed", "charge", fmt.Sprintf("Charge %s has already been disputed.", ch.ID))
	case ch.AmountRefunded == ch.Amount:
		return nil, invalidRequest("charge_already_refunded", "charge", fmt.Sprintf("Charge %s has been refunded in full, so there is nothing to dispute.", ch.ID))
	}
	dp := &Dispute{
		ID:       newID("dp_"),
		Charge:   ch.ID,
		Amount:   ch.Amount - ch.AmountRefunded,
		Currency: ch.Currency,
		Reason:   DisputeReasonFraudulent,
		Status:   DisputeStatusNeedsResponse,
		Created:  time.Now(),
	}
	s.applyDispute(dp)
	s.emit(EventChargeDisputeCreated, dp.object(), nil)
	return dp, nil
}

// applyDispute records dp and marks its charge disputed. The caller holds s.mu.
func (s *Server) applyDispute(dp *Dispute) {
	s.disputes = append(s.disputes, dp)
	s.disputesByID[dp.ID] = dp
	if ch := s.chargesByID[dp.Charge]; ch != nil {
		ch.Disputed = true
	}
}

func (s *Server) retrieveDispute(req *apiRequest) result {
	id := req.r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	dp, ok := s.disputesByID[id]
	if !ok {
		return rejected(noSuchResource(http.StatusNotFound, "dispute", "id", id))
	}
	return succeeded(dp.object())
}

// Disputes returns every dispute Stripe holds, oldest first.
func (s *Server) Disputes() []Dispute {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Dispute, len(s.disputes))
	for i, dp := range s.disputes {
		out[i] = *dp
	}
	return out
}

// disputeObject is a dispute on the wire. Its charge is the charge's ID, unexpanded.
type disputeObject struct {
	ID                  string                `json:"id"`
	Object              string                `json:"object"`
	Amount              int64                 `json:"amount"`
	BalanceTransactions []any                 `json:"balance_transactions"`
	Charge              string                `json:"charge"`
	Created             int64                 `json:"created"`
	Currency            string                `json:"currency"`
	EvidenceDetails     evidenceDetailsObject `json:"evidence_details"`
	IsChargeRefundable  bool                  `json:"is_charge_refundable"`
	Livemode            bool                  `json:"livemode"`
	Metadata            map[string]string     `json:"metadata"`
	PaymentIntent       *string               `json:"payment_intent"`
	Reason              string                `json:"reason"`
	Status              string                `json:"status"`
}

// evidenceDetailsObject is when a dispute's evidence is due and whether any was given.
type evidenceDetailsObject struct {
	DueBy           int64 `json:"due_by"`
	HasEvidence     bool  `json:"has_evidence"`
	PastDue         bool  `json:"past_due"`
	SubmissionCount int   `json:"submission_count"`
}

// object needs no lock: a dispute never changes once stored.
func (dp *Dispute) object() disputeObject {
	return disputeObject{
		ID:                  dp.ID,
		Object:              "dispute",
		Amount:              dp.Amount,
		BalanceTransactions: []any{},
		Charge:              dp.Charge,
		Created:             dp.Created.Unix(),
		Currency:            dp.Currency,
		EvidenceDetails:     evidenceDetailsObject{DueBy: dp.Created.Add(disputeResponseWindow).Unix()},
		Metadata:            map[string]string{},
		Reason:              dp.Reason,
		Status:              dp.Status,
	}
}
