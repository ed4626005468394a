package models

import (
	"context"
	"fmt"
	"time"
)

// User is a rider. Riders authenticate with an API token whose SHA-256 is all we keep.
type User struct {
	ID               int64
	CreatedAt        time.Time
	Email            string
	StripeCustomerID string
}

const userColumns = `id, created_at, email, stripe_customer_id`

func scanUser(row interface{ Scan(...any) error }) (*User, error) {
	var u User
	if err := row.Scan(&u.ID, &u.CreatedAt, &u.Email, &u.StripeCustomerID); err != nil {
		return nil, err
	}
	return &u, nil
}

// UserInsertParams are the columns of a new user.
type UserInsertParams struct {
	Email            string
	StripeCustomerID string
	APITokenHash     []byte
}

// UserInsert creates a user. It returns ErrUniqueViolation if the email or the Stripe customer
// is taken.
func UserInsert(ctx context.Context, db DBTX, params UserInsertParams) (*User, error) {
	user, err := scanUser(db.QueryRow(ctx, `
		INSERT INTO users (email, stripe_customer_id, api_token_hash)
		VALUES ($1, $2, $3)
		RETURNING `+userColumns,
		params.Email, params.StripeCustomerID, params.APITokenHash))
	if err != nil {
		return nil, fmt.Errorf("error inserting user: %w", uniqueViolation(err))
	}
	return user, nil
}

// UserGetByID loads a user, or returns ErrNotFound.
func UserGetByID(ctx context.Context, db DBTX, id int64) (*User, error) {
	user, err := scanUser(db.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("error getting user %d: %w", id, notFound(err))
	}
	return user, nil
}

// UserGetByAPITokenHash finds the user a token belongs to, or returns ErrNotFound.
func UserGetByAPITokenHash(ctx context.Context, db DBTX, hash []byte) (*User, error) {
	user, err := scanUser(db.QueryRow(ctx, `
		SELECT `+userColumns+`
		FROM users
		WHERE api_token_hash = $1`, hash))
	if err != nil {
		return nil, fmt.Errorf("error getting user by token: %w", notFound(err))
	}
	return user, nil
}

// UserUpdateAPITokenHash replaces the token of the user with email, so that only the new token
// gets in. It returns ErrNotFound if there is no such user.
func UserUpdateAPITokenHash(ctx context.Context, db DBTX, email string, hash []byte) (*User, error) {
	user, err := scanUser(db.QueryRow(ctx, `
		UPDATE users
		SET api_token_hash = $2
		WHERE email = $1
		RETURNING `+userColumns, email, hash))
	if err != nil {
		return nil, fmt.Errorf("error replacing user's token: %w", notFound(err))
	}
	return user, nil
}
