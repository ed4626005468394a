package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

func TestCreateUser(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")
	url := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + url, "API_TOKEN_SECRET=" + ridetest.TokenSecret}

	t.Run("WithStripeCustomerID", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "create-user", "-email", "a@example.com", "-stripe-customer-id", "cus_A")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("want exactly one line, got %q", out)
		}
		// Strings for email and token: a missing or null field decodes as "" and fails, which
		// a comparison of a map's value with "" would not (a missing key is nil).
		var user struct {
			ID    *int64  `json:"id"`
			Email *string `json:"email"`
			Token *string `json:"token"`
		}
		if err := json.Unmarshal([]byte(out), &user); err != nil || user.ID == nil || user.Email == nil || user.Token == nil {
			t.Fatalf("want one JSON line with id, email, token; got %q (%v)", out, err)
		}
		if *user.Email != "a@example.com" || !ridetest.TokenKey.Issued(*user.Token) {
			t.Fatalf("want the rider's email and an rr_ token issued under API_TOKEN_SECRET, got %q", out)
		}

		// The database keeps the token's SHA-256, computed here without the code under test,
		// and never the token.
		sum := sha256.Sum256([]byte(*user.Token))
		pool, err := pgxpool.New(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var id int64
		var stored []byte
		if err := pool.QueryRow(t.Context(), `SELECT id, api_token_hash FROM users WHERE email = 'a@example.com'`).Scan(&id, &stored); err != nil {
			t.Fatal(err)
		}
		if id != *user.ID || !bytes.Equal(stored, sum[:]) {
			t.Fatalf("want user %d stored with the SHA-256 of the printed token, %x; got user %d with %x", *user.ID, sum, id, stored)
		}
		var tokenStored bool
		if err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM users u WHERE strpos(row_to_json(u)::text, $1) > 0)`,
			*user.Token).Scan(&tokenStored); err != nil {
			t.Fatal(err)
		}
		if tokenStored {
			t.Fatal("want the token itself stored nowhere in users")
		}

		// A new token replaces the old one.
		out, errOut, code = proctest.Run(t, admin, env, "reissue-token", "-email", "A@example.com")
		var reissued struct {
			ID    int64  `json:"id"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal([]byte(out), &reissued); code != 0 || err != nil || reissued.ID != id ||
			reissued.Token == *user.Token || !ridetest.TokenKey.Issued(reissued.Token) {
			t.Fatalf("want a new token for user %d, got exit %d: %q %s", id, code, out, errOut)
		}
		sum = sha256.Sum256([]byte(reissued.Token))
		if err := pool.QueryRow(t.Context(), `SELECT api_token_hash FROM users WHERE id = $1`, id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stored, sum[:]) {
			t.Fatal("want the new token's SHA-256 stored in place of the old one's")
		}
	})

	t.Run("NoTokenSecret", func(t *testing.T) {
		for _, args := range [][]string{
			{"create-user", "-email", "d@example.com", "-stripe-customer-id", "cus_D"},
			{"reissue-token", "-email", "a@example.com"},
		} {
			_, errOut, code := proctest.Run(t, admin, []string{"DATABASE_URL=" + url}, args...)
			if code == 0 || !strings.Contains(errOut, "API_TOKEN_SECRET is required") {
				t.Fatalf("%s: want a non-zero exit saying API_TOKEN_SECRET is required, got %d: %s", args[0], code, errOut)
			}
		}
	})

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"NoCommand", nil, "no command"},
		{"UnknownCommand", []string{"delete-everything"}, "unknown command"},
		{"NoEmail", []string{"create-user", "-stripe-customer-id", "cus_B"}, "-email"},
		{"NeitherCustomerNorCard", []string{"create-user", "-email", "b@example.com"}, "exactly one of"},
		{"BothCustomerAndCard", []string{"create-user", "-email", "b@example.com", "-stripe-customer-id", "cus_B", "-card", "tok_visa"}, "exactly one of"},
		{"CardWithoutStripeKey", []string{"create-user", "-email", "b@example.com", "-card", "tok_visa"}, "STRIPE_API_KEY is not set"},
		{"ReissueUnknownRider", []string{"reissue-token", "-email", "nobody@example.com"}, "no rider has the email"},
		{"ReissueNoEmail", []string{"reissue-token"}, "-email is required"},
		{"DuplicateCustomer", []string{"create-user", "-email", "c@example.com", "-stripe-customer-id", "cus_A"}, "already exists"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := proctest.Run(t, admin, env, tt.args...)
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("want a non-zero exit saying %q, got %d: %s", tt.want, code, errOut)
			}
		})
	}
}
