package models

import (
	"context"
	"fmt"
)

// StripeKeySecretGet returns this database's secret for deriving Stripe idempotency keys.
// Migration 00008_stripe_key_secret.sql draws it once, at random, so every backup, replica and
// restore of the database carries it along.
func StripeKeySecretGet(ctx context.Context, db DBTX) ([]byte, error) {
	var secret []byte
	if err := db.QueryRow(ctx, `SELECT secret FROM stripe_key_secret`).Scan(&secret); err != nil {
		return nil, fmt.Errorf("error reading the Stripe key secret: %w", notFound(err))
	}
	return secret, nil
}
