package fakestripe

import (
	"net/http"
	"time"
)

// customer is a Stripe customer with at most one card, its default source.
type customer struct {
	id          string
	email       string
	name        string
	description string
	metadata    map[string]string
	created     time.Time
	card        *card // nil when created without a source
}

// customerCreateParams are the parameters Stripe's POST /v1/customers takes. Those the
// stand-in does not model are accepted and ignored.
var customerCreateParams = []string{
	"address", "balance", "cash_balance", "coupon", "description", "email", "expand",
	"invoice_prefix", "invoice_settings", "metadata", "name", "next_invoice_sequence",
	"payment_method", "phone", "preferred_locales", "promotion_code", "shipping", "source", "tax",
	"tax_exempt", "tax_id_data", "test_clock", "validate",
}

func (s *Server) createCustomer(req *apiRequest) result {
	if e := checkParams(req.params, customerCreateParams); e != nil {
		return rejected(e)
	}

	c := &customer{
		id:          newID("cus_"),
		email:       req.params.Get("email"),
		name:        req.params.Get("name"),
		description: req.params.Get("description"),
		metadata:    metadataParam(req.params),
		created:     time.Now(),
	}
	if token := req.params.Get("source"); token != "" {
		template, ok := testTokens[token]
		if !ok {
			return rejected(noSuchResource(http.StatusBadRequest, "token", "source", token))
		}
		if template.declinesAttach {
			return failedExecuting(cardDeclined(""))
		}
		c.card = &card{id: newID("card_"), customer: c.id, token: token, cardTemplate: template}
	}

	s.mu.Lock()
	s.customers[c.id] = c
	s.mu.Unlock()
	req.changes.Customer = c.record()

	return succeeded(c.object())
}

func (s *Server) retrieveCustomer(req *apiRequest) result {
	id := req.r.PathValue("id")

	s.mu.Lock()
	c, ok := s.customers[id]
	s.mu.Unlock()

	if !ok {
		return rejected(noSuchResource(http.StatusNotFound, "customer", "id", id))
	}
	return succeeded(c.object())
}

// customerObject is a customer on the wire. Since API version 2020-08-27 Stripe leaves the
// "sources" list out unless expanded, so only default_source names the card.
type customerObject struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Balance       int64             `json:"balance"`
	Created       int64             `json:"created"`
	Currency      *string           `json:"currency"`
	DefaultSource *string           `json:"default_source"`
	Delinquent    bool              `json:"delinquent"`
	Description   *string           `json:"description"`
	Email         *string           `json:"email"`
	Livemode      bool              `json:"livemode"`
	Metadata      map[string]string `json:"metadata"`
	Name          *string           `json:"name"`
}

// object needs no lock: a customer never changes once stored.
func (c *customer) object() customerObject {
	o := customerObject{
		ID:          c.id,
		Object:      "customer",
		Created:     c.created.Unix(),
		Description: nullable(c.description),
		Email:       nullable(c.email),
		Metadata:    c.metadata,
		Name:        nullable(c.name),
	}
	if c.card != nil {
		o.DefaultSource = &c.card.id
	}
	return o
}
