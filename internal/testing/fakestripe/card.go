package fakestripe

import "time"

// card is a payment card attached to a customer or passed straight to a charge as a token.
type card struct {
	id       string
	customer string // empty for a card used once through a token
	token    string // the test token it was made from
	cardTemplate
}

// cardTemplate is what one of Stripe's test tokens stands for.
type cardTemplate struct {
	brand   string
	last4   string
	funding string

	declinesAttach  bool // attaching it to a customer is declined
	declinesCharges bool // charging it is declined
}

// testTokens are the Stripe test tokens the stand-in knows, with the behaviour Stripe documents
// for them (https://stripe.com/docs/testing). tok_chargeCustomerFail is the interesting one for
// Rocket Rides: it attaches to a customer fine and then every charge declines.
var testTokens = map[string]cardTemplate{
	"tok_visa":               {brand: "Visa", last4: "4242", funding: "credit"},
	"tok_mastercard":         {brand: "MasterCard", last4: "4444", funding: "credit"},
	"tok_chargeCustomerFail": {brand: "Visa", last4: "0341", funding: "credit", declinesCharges: true},
	"tok_chargeDeclined":     {brand: "Visa", last4: "0002", funding: "credit", declinesAttach: true, declinesCharges: true},
}

// cardObject is a card on the wire, as Stripe embeds it in a charge's "source".
type cardObject struct {
	ID       string  `json:"id"`
	Object   string  `json:"object"`
	Brand    string  `json:"brand"`
	Country  string  `json:"country"`
	Customer *string `json:"customer"`
	CVCCheck string  `json:"cvc_check"`
	ExpMonth int     `json:"exp_month"`
	ExpYear  int     `json:"exp_year"`
	Funding  string  `json:"funding"`
	Last4    string  `json:"last4"`
}

func (c *card) object() cardObject {
	return cardObject{
		ID:       c.id,
		Object:   "card",
		Brand:    c.brand,
		Country:  "US",
		Customer: nullable(c.customer),
		CVCCheck: "pass",
		ExpMonth: 12,
		ExpYear:  time.Now().Year() + 5,
		Funding:  c.funding,
		Last4:    c.last4,
	}
}

// nullable renders an unset string field as JSON null, as Stripe does.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
