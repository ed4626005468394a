package fakestripe

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Charge is the stand-in's record of one charge, what a test inspects to assert how many
// charges Stripe holds and for what. Like Stripe, the stand-in records a declined attempt too,
// with Status "failed".
type Charge struct {
	ID          string            `json:"id"`
	Amount      int64             `json:"amount"`
	Currency    string            `json:"currency"`
	Customer    string            `json:"customer,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata"`
	Status      string            `json:"status"` // "succeeded" or "failed"
	Paid        bool              `json:"paid"`
	Captured    bool              `json:"captured"`

	// AmountRefunded is what refunds took back of Amount; Refunded, whether all of it.
	AmountRefunded int64 `json:"amount_refunded,omitempty"`
	Refunded       bool  `json:"refunded,omitempty"`

	// Disputed is whether the rider's bank disputed the charge (see DisputeCharge).
	Disputed bool `json:"disputed,omitempty"`

	FailureCode string    `json:"failure_code,omitempty"`
	Created     time.Time `json:"created"`

	// IdempotencyKey is the Idempotency-Key of the request that created the charge, empty if it
	// had none.
	IdempotencyKey string `json:"idempotency_key,omitempty"`

	card         card
	receiptEmail string
}

// Stripe's charge statuses that the stand-in produces.
const (
	ChargeStatusSucceeded = "succeeded"
	ChargeStatusFailed    = "failed"
)

// chargeCreateParams are the parameters Stripe's POST /v1/charges takes. Those the stand-in
// does not model are accepted and ignored. Stripe's per-currency minimum amount is not modelled
// either: any amount of at least 1 is charged.
var chargeCreateParams = []string{
	"amount", "application_fee", "application_fee_amount", "capture", "currency", "customer",
	"description", "destination", "exchange_rate", "expand", "level3", "metadata", "on_behalf_of",
	"radar_options", "receipt_email", "shipping", "source", "statement_descriptor",
	"statement_descriptor_suffix", "transfer_data", "transfer_group",
}

func (s *Server) createCharge(req *apiRequest) result {
	s.runBeforeChargeHook()

	p := req.params
	if e := checkParams(p, chargeCreateParams); e != nil {
		return rejected(e)
	}
	amount, ok, e := intParam(p, "amount")
	switch {
	case e != nil:
		return rejected(e)
	case !ok:
		return rejected(missingParam("amount"))
	case amount < 1:
		return rejected(invalidRequest("", "amount", "This value must be greater than or equal to 1."))
	}
	currency := strings.ToLower(p.Get("currency"))
	if currency == "" {
		return rejected(missingParam("currency"))
	}
	if !isCurrencyCode(currency) {
		return rejected(invalidRequest("", "currency", fmt.Sprintf("Invalid currency: %s.", currency)))
	}
	capture, e := boolParam(p, "capture", true)
	if e != nil {
		return rejected(e)
	}
	if req.r.Context().Value(failExecutingKey{}) != nil {
		return failedExecuting(internalError())
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	source, e := s.chargeSource(p.Get("customer"), p.Get("source"))
	if e != nil {
		return rejected(e)
	}
	ch := &Charge{
		ID:             newID("ch_"),
		Amount:         amount,
		Currency:       currency,
		Customer:       source.customer,
		Description:    p.Get("description"),
		Metadata:       metadataParam(p),
		Created:        time.Now(),
		IdempotencyKey: req.idempotencyKey,
		card:           *source,
		receiptEmail:   p.Get("receipt_email"),
	}
	if source.declinesCharges {
		ch.Status = ChargeStatusFailed
		ch.FailureCode = "card_declined"
	} else {
		ch.Status = ChargeStatusSucceeded
		ch.Paid = true
		ch.Captured = capture
	}
	s.charges = append(s.charges, ch)
	s.chargesByID[ch.ID] = ch
	req.changes.Charge = ch.record()

	if ch.Status == ChargeStatusFailed {
		return failedExecuting(cardDeclined(ch.ID))
	}
	s.emit(EventChargeSucceeded, s.chargeEventObject(ch), req)
	return succeeded(ch.object())
}

// runBeforeChargeHook runs the test hook, if set, once a charge request holds its idempotency
// key and before it executes: the window in which a concurrent request with the same key gets
// a 409.
func (s *Server) runBeforeChargeHook() {
	s.mu.Lock()
	hook := s.beforeChargeRun
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// chargeSource finds the card a charge draws on: the customer's default card, a card of the
// customer named by source, or a card made from a test token when there is no customer. Must
// be called with s.mu held. Its errors all come before anything executes, so none is saved under
// the idempotency key, not even the 402 Stripe gives a customer without a card.
func (s *Server) chargeSource(customerID, source string) (*card, *apiError) {
	if customerID == "" {
		if source == "" {
			return nil, invalidRequest("parameter_missing", "customer", "Must provide source or customer.")
		}
		template, ok := testTokens[source]
		if !ok {
			return nil, noSuchResource(http.StatusBadRequest, "token", "source", source)
		}
		return &card{id: newID("card_"), token: source, cardTemplate: template}, nil
	}

	c, ok := s.customers[customerID]
	switch {
	case !ok:
		return nil, noSuchResource(http.StatusBadRequest, "customer", "customer", customerID)
	case source != "" && (c.card == nil || c.card.id != source):
		return nil, invalidRequest("missing", "source",
			fmt.Sprintf("Customer %s does not have a linked source with ID %s.", customerID, source))
	case c.card == nil:
		return nil, newAPIError(http.StatusPaymentRequired, errorTypeCard, "missing", "card",
			"Cannot charge a customer that has no active card")
	}
	return c.card, nil
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

func (s *Server) retrieveCharge(req *apiRequest) result {
	id := req.r.PathValue("id")

	s.mu.Lock()
	defer s.mu.Unlock()

	ch, ok := s.chargesByID[id]
	if !ok {
		return rejected(noSuchResource(http.StatusNotFound, "charge", "id", id))
	}
	return succeeded(ch.object())
}

// Charges returns every charge Stripe holds, failed ones included, oldest first.
func (s *Server) Charges() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyCharges(s.charges, func(*Charge) bool { return true })
}

// ChargesForIdempotencyKey returns the charges created by requests carrying key, oldest first:
// the assertion that a retried request charged once is that this holds exactly one.
func (s *Server) ChargesForIdempotencyKey(key string) []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyCharges(s.charges, func(ch *Charge) bool { return ch.IdempotencyKey == key })
}

// ChargeRequests counts the POST /v1/charges requests that reached the Server (after any
// latency), whatever became of them: replays and requests answered by a fault count too.
func (s *Server) ChargeRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chargeRequests
}

func copyCharges(charges []*Charge, keep func(*Charge) bool) []Charge {
	out := make([]Charge, 0, len(charges))
	for _, ch := range charges {
		if keep(ch) {
			c := *ch
			c.Metadata = maps.Clone(ch.Metadata)
			out = append(out, c)
		}
	}
	return out
}

// chargeObject is a charge on the wire.
type chargeObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountCaptured int64             `json:"amount_captured"`
	AmountRefunded int64             `json:"amount_refunded"`
	Captured       bool              `json:"captured"`
	Created        int64             `json:"created"`
	Currency       string            `json:"currency"`
	Customer       *string           `json:"customer"`
	Description    *string           `json:"description"`
	Disputed       bool              `json:"disputed"`
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	Livemode       bool              `json:"livemode"`
	Metadata       map[string]string `json:"metadata"`
	Outcome        outcomeObject     `json:"outcome"`
	Paid           bool              `json:"paid"`
	PaymentMethod  string            `json:"payment_method"`
	ReceiptEmail   *string           `json:"receipt_email"`
	Refunded       bool              `json:"refunded"`
	Source         cardObject        `json:"source"`
	Status         string            `json:"status"`

	// Refunds is set in events only: since API version 2022-11-15 Stripe leaves it out of a
	// charge unless expanded, which the stand-in does not do.
	Refunds *refundListObject `json:"refunds,omitempty"`
}

// outcomeObject is Stripe's account of what the card network said.
type outcomeObject struct {
	NetworkStatus string  `json:"network_status"`
	Reason        *string `json:"reason"`
	RiskLevel     string  `json:"risk_level"`
	SellerMessage string  `json:"seller_message"`
	Type          string  `json:"type"`
}

// object reads what refunds and disputes change, so its caller holds the Server's lock.
func (ch *Charge) object() chargeObject {
	o := chargeObject{
		ID:             ch.ID,
		Object:         "charge",
		Amount:         ch.Amount,
		Captured:       ch.Captured,
		Created:        ch.Created.Unix(),
		Currency:       ch.Currency,
		Customer:       nullable(ch.Customer),
		Description:    nullable(ch.Description),
		Metadata:       ch.Metadata,
		Paid:           ch.Paid,
		PaymentMethod:  ch.card.id,
		ReceiptEmail:   nullable(ch.receiptEmail),
		Source:         ch.card.object(),
		Status:         ch.Status,
		AmountRefunded: ch.AmountRefunded,
		Refunded:       ch.Refunded,
		Disputed:       ch.Disputed,
		Outcome: outcomeObject{
			NetworkStatus: "approved_by_network",
			RiskLevel:     "normal",
			SellerMessage: "Payment complete.",
			Type:          "authorized",
		},
	}
	if ch.Captured {
		o.AmountCaptured = ch.Amount
	}
	if ch.Status == ChargeStatusFailed {
		o.FailureCode = nullable(ch.FailureCode)
		o.FailureMessage = nullable("Your card was declined.")
		o.Outcome = outcomeObject{
			NetworkStatus: "declined_by_network",
			Reason:        nullable("generic_decline"),
			RiskLevel:     "normal",
			SellerMessage: "The bank did not return any further details with this decline.",
			Type:          "issuer_declined",
		}
	}
	return o
}

// chargeEventObject is ch as an event carries it: with its refunds, newest first. The caller
// holds s.mu.
func (s *Server) chargeEventObject(ch *Charge) chargeObject {
	o := ch.object()
	list := &refundListObject{Object: "list", Data: []refundObject{}, URL: "/v1/charges/" + ch.ID + "/refunds"}
	for _, rf := range slices.Backward(s.refunds) {
		if rf.Charge == ch.ID {
			list.Data = append(list.Data, rf.object())
		}
	}
	list.TotalCount = len(list.Data)
	o.Refunds = list
	return o
}
