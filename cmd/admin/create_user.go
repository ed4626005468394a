package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/cmd/internal/riders"
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
	if *email == "" {
		return errors.New("create-user: -email is required")
	}
	if (*customerID == "") == (*card == "") {
		return errors.New("create-user: give exactly one of -stripe-customer-id and -card")
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	tokenKey, err := cfg.TokenKey()
	if err != nil {
		return err
	}
	var sc *client.API
	if *card != "" {
		if sc, err = bootstrap.NewStripe(cfg, nil); err != nil {
			return err
		}
	}
	pool, err := bootstrap.OpenPool(ctx, cfg, bootstrap.NewLogger(os.Stderr, cfg))
	if err != nil {
		return err
	}
	defer pool.Close()

	created, err := riders.Create(ctx, pool, riders.Params{Email: *email, StripeCustomerID: *customerID, CardToken: *card, Stripe: sc, TokenKey: tokenKey})
	if err != nil {
		return fmt.Errorf("create-user: %w", err)
	}

	return printToken(created.User, created.Token)
}

// printToken prints a rider's new API token as one JSON line, with the rider it belongs to.
func printToken(user *models.User, token string) error {
	return json.NewEncoder(os.Stdout).Encode(struct {
		ID    int64  `json:"id"`
		Email string `json:"email"`
		Token string `json:"token"`
	}{user.ID, user.Email, token})
}
