package seed

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/authtoken"
)

// runTagLen is the length of the random tag in seeded riders' emails: 12 base32 characters,
// 60 bits, so that two seeds of one database never make the same email.
const runTagLen = 12

// insertRiders creates n riders, created at createdAt, and returns their ids, which come from
// the users table's own sequence as create-user's do. Each gets the hash of a fresh token as
// create-user makes it; the tokens themselves are thrown away, for these riders are history,
// not logins.
func insertRiders(ctx context.Context, tx pgx.Tx, n int, createdAt time.Time) ([]int64, error) {
	if n == 0 {
		return nil, nil
	}
	// Emails must be lower case (a CHECK of the users table); base32 is upper case.
	runTag := strings.ToLower(rand.Text()[:runTagLen])
	emails := make([]string, n)
	customerIDs := make([]string, n)
	tokenHashes := make([][]byte, n)
	for i := range n {
		emails[i] = fmt.Sprintf("seed-%s-%d@rocketrides.example", runTag, i+1)
		customerIDs[i] = "cus_seed_" + rand.Text()
		tokenHashes[i] = authtoken.Hash(rand.Text())
	}

	rows, err := tx.Query(ctx, `
		INSERT INTO users (created_at, email, stripe_customer_id, api_token_hash)
		SELECT $1, email, stripe_customer_id, api_token_hash
		FROM unnest($2::text[], $3::text[], $4::bytea[]) AS u (email, stripe_customer_id, api_token_hash)
		RETURNING id`, createdAt, emails, customerIDs, tokenHashes)
	if err != nil {
		return nil, fmt.Errorf("error inserting riders: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("error inserting riders: %w", err)
	}
	return ids, nil
}
