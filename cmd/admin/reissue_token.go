package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/models"
)

// reissueToken gives a rider a new API token and prints it, the only time it is ever shown; the
// old one stops working. It is how a rider whose token predates API_TOKEN_SECRET, or a changed
// secret, gets in again, and how a leaked token is revoked.
func reissueToken(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("reissue-token", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	email := flags.String("email", "", "the rider's email address")
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("reissue-token: %w", err)
	}
	if *email == "" {
		return errors.New("reissue-token: -email is required")
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	tokenKey, err := cfg.TokenKey()
	if err != nil {
		return err
	}
	pool, err := bootstrap.OpenPool(ctx, cfg, bootstrap.NewLogger(os.Stderr, cfg))
	if err != nil {
		return err
	}
	defer pool.Close()

	token, hash, err := tokenKey.New()
	if err != nil {
		return fmt.Errorf("reissue-token: %w", err)
	}
	user, err := models.UserUpdateAPITokenHash(ctx, pool, strings.ToLower(strings.TrimSpace(*email)), hash)
	if errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("reissue-token: no rider has the email %s", *email)
	}
	if err != nil {
		return fmt.Errorf("reissue-token: %w", err)
	}
	return printToken(user, token)
}
