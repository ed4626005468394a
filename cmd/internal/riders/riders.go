// Package riders creates riders: a Stripe customer for their card when needed, a user row, and
// the API token that is shown once. cmd/admin and the simulator share it.
package riders

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/models"
)

// Params describe a new rider: an email and either an existing Stripe customer or a card
// token (with Stripe set) to create one from.
type Params struct {
	Email            string
	StripeCustomerID string
	CardToken        string
	Stripe           *client.API

	// TokenKey makes the rider's API token (bootstrap's Config.TokenKey).
	TokenKey authtoken.Key
}

// Created is a new rider and the API token they authenticate with.
type Created struct {
	User  *models.User
	Token string
}

// Create makes a rider.
func Create(ctx context.Context, db models.DBTX, params Params) (*Created, error) {
	email := strings.ToLower(strings.TrimSpace(params.Email))
	switch {
	case email == "" || !strings.Contains(email, "@"):
		return nil, errors.New("the email must be an email address")
	case (params.StripeCustomerID == "") == (params.CardToken == ""):
		return nil, errors.New("give exactly one of a Stripe customer id and a card token")
	}

	customerID := params.StripeCustomerID
	if params.CardToken != "" {
		if params.Stripe == nil {
			return nil, errors.New("creating a Stripe customer needs a Stripe client")
		}
		customerParams := &stripe.CustomerParams{Email: stripe.String(email), Source: stripe.String(params.CardToken)}
		customerParams.Context = ctx
		customer, err := params.Stripe.Customers.New(customerParams)
		if err != nil {
			return nil, fmt.Errorf("error creating Stripe customer: %w", err)
		}
		customerID = customer.ID
	}

	token, hash, err := params.TokenKey.New()
	if err != nil {
		return nil, err
	}
	user, err := models.UserInsert(ctx, db, models.UserInsertParams{Email: email, StripeCustomerID: customerID, APITokenHash: hash})
	if errors.Is(err, models.ErrUniqueViolation) {
		return nil, fmt.Errorf("a user with email %s or Stripe customer %s already exists", email, customerID)
	}
	if err != nil {
		return nil, err
	}
	return &Created{User: user, Token: token}, nil
}
