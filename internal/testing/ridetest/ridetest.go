// Package ridetest sets up what tests of ride requests share: a fresh database, the Stripe
// stand-in with the real stripe-go client pointed at it, and riders with good and declining
// cards, created the way cmd/admin creates them.
package ridetest

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/models"
)

// StripeAPIKey is the key tests charge with; the stand-in accepts any sk_test_ key.
const StripeAPIKey = "sk_test_rocketrides"

// StripeTimeout is short so that a test of Stripe timing out does not wait long.
const StripeTimeout = 2 * time.Second

// TokenSecret is the API token secret of tests (API_TOKEN_SECRET), and TokenKey its key: riders
// made here carry tokens the tests' API accepts.
const TokenSecret = "rocketrides-test-token-secret-not-for-production"

// TokenKey is TokenSecret's key.
var TokenKey = func() authtoken.Key {
	key, err := authtoken.ParseKey(TokenSecret)
	if err != nil {
		panic(err)
	}
	return key
}()

// Bundle is one test's world.
type Bundle struct {
	Pool         *pgxpool.Pool
	Stripe       *fakestripe.TestServer
	StripeClient *client.API

	// Rider has a card that works; DecliningRider's card is declined.
	Rider          *Rider
	DecliningRider *Rider
}

// Rider is a user together with their API token.
type Rider struct {
	*models.User
	Token string
}

// Setup builds a Bundle on a fresh database cloned from the migrated template.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	b := &Bundle{
		Pool:   dbtest.NewPool(t),
		Stripe: fakestripe.NewTestServer(t, fakestripe.Options{}),
	}
	b.StripeClient = stripeclient.New(stripeclient.Config{APIKey: StripeAPIKey, URL: b.Stripe.URL, Timeout: StripeTimeout})
	b.Rider = b.NewRider(t, "tok_visa")
	b.DecliningRider = b.NewRider(t, "tok_chargeCustomerFail")
	return b
}

var riderSeq atomic.Int64

// NewRider creates a Stripe customer with the given card token and a user for it.
func (b *Bundle) NewRider(t testing.TB, cardToken string) *Rider {
	t.Helper()
	ctx := context.Background()
	email := fmt.Sprintf("rider%d@example.com", riderSeq.Add(1))

	customer, err := b.StripeClient.Customers.New(&stripe.CustomerParams{
		Email:  stripe.String(email),
		Source: stripe.String(cardToken),
	})
	if err != nil {
		t.Fatalf("error creating Stripe customer: %s", err)
	}

	token, hash, err := TokenKey.New()
	if err != nil {
		t.Fatal(err)
	}
	user, err := models.UserInsert(ctx, b.Pool, models.UserInsertParams{
		Email: email, StripeCustomerID: customer.ID, APITokenHash: hash,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Rider{User: user, Token: token}
}

// FreshConnStripeClient is a Stripe client that opens a new connection for every call. Tests of
// a dropped connection need it: on a reused keep-alive connection, Go's transport itself
// re-sends a request that carries an Idempotency-Key, which hides the drop from the code under
// test.
func (b *Bundle) FreshConnStripeClient() *client.API {
	return stripeclient.New(stripeclient.Config{
		APIKey: StripeAPIKey, URL: b.Stripe.URL, Timeout: StripeTimeout,
		Transport: &http.Transport{DisableKeepAlives: true},
	})
}

// SucceededCharges are the charges Stripe holds that went through.
func (b *Bundle) SucceededCharges() []fakestripe.Charge {
	var ok []fakestripe.Charge
	for _, c := range b.Stripe.Charges() {
		if c.Status == "succeeded" {
			ok = append(ok, c)
		}
	}
	return ok
}

// Count runs a count(*) query and returns the number.
func (b *Bundle) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("error counting with %q: %s", sql, err)
	}
	return n
}

// Exec runs a statement, for tests that put rows into a particular state.
func (b *Bundle) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := b.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("error running %q: %s", sql, err)
	}
}
