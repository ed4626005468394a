package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/internal/bootstrap"
	"github.com/rocketrides/rocketrides/models"
)

// createUser adds a rider and prints their API token, the only time it is ever shown.
func createUser(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("create-user", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	email := flags.String("email", "", "the rider's email address")
	customerID := flags.String("stripe-customer-id", "", "an existing Stripe customer (cus_...)")
	card := flags.String("card", "", "a Stripe card token (tok_visa): creates the Stripe customer")
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("create-user: %w", err)
	}

	*email = strings.ToLower(strings.TrimSpace(*email))
	switch {
	case *email == "" || !strings.Contains(*email, "@"):
		return errors.New("create-user: -email must be an email address")
	case (*customerID == "") == (*card == ""):
		return errors.New("create-user: give exactly one of -stripe-customer-id and -card")
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	logger := bootstrap.NewLogger(os.Stderr, cfg)
	pool, err := bootstrap.OpenPool(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pool.Close()

	if *card != "" {
		sc, err := bootstrap.NewStripe(cfg)
		if err != nil {
			return err
		}
		params := &stripe.CustomerParams{Email: email, Source: card}
		params.Context = ctx
		customer, err := sc.Customers.New(params)
		if err != nil {
			return fmt.Errorf("error creating Stripe customer: %w", err)
		}
		*customerID = customer.ID
	}

	token, hash, err := authtoken.New()
	if err != nil {
		return err
	}
	user, err := models.UserInsert(ctx, pool, models.UserInsertParams{
		Email:            *email,
		StripeCustomerID: *customerID,
		APITokenHash:     hash,
	})
	if errors.Is(err, models.ErrUniqueViolation) {
		return fmt.Errorf("a user with email %s or Stripe customer %s already exists", *email, *customerID)
	}
	if err != nil {
		return err
	}

	return json.NewEncoder(os.Stdout).Encode(struct {
		ID    int64  `json:"id"`
		Email string `json:"email"`
		Token string `json:"token"`
	}{user.ID, user.Email, token})
}
