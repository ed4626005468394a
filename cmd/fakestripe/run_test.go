package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"
)

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("ServesStripeUntilCancelled", func(t *testing.T) {
		t.Parallel()
		url, stop := start(t, "-addr", "127.0.0.1:0")

		ch, err := stripeClient(url).Charges.New(&stripe.ChargeParams{
			Amount:   stripe.Int64(2000),
			Currency: stripe.String("usd"),
			Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
		})
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}
		if ch.Status != stripe.ChargeStatusSucceeded {
			t.Errorf("charge status %q, want succeeded", ch.Status)
		}

		if err := stop(); err != nil {
			t.Errorf("run returned %v after cancellation, want nil", err)
		}
	})

	t.Run("JournalKeepsCustomersForTheNextRun", func(t *testing.T) {
		t.Parallel()
		// A directory that does not exist yet, as .data/ on a fresh clone.
		journal := filepath.Join(t.TempDir(), "data", "fakestripe.jsonl")
		url, stop := start(t, "-addr", "127.0.0.1:0", "-journal", journal)
		cus, err := stripeClient(url).Customers.New(&stripe.CustomerParams{Source: stripe.String("tok_visa")})
		if err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		url, stop = start(t, "-addr", "127.0.0.1:0", "-journal", journal)
		defer stop()
		params := &stripe.ChargeParams{Amount: stripe.Int64(2000), Currency: stripe.String("usd"), Customer: stripe.String(cus.ID)}
		if _, err := stripeClient(url).Charges.New(params); err != nil {
			t.Fatalf("want the customer of the first run charged, got %v", err)
		}
	})

	t.Run("BadAddressFails", func(t *testing.T) {
		t.Parallel()

		err := run(t.Context(), []string{"-addr", "not-an-address"}, func(string) string { return "" }, io.Discard, io.Discard)

		if err == nil || !strings.Contains(err.Error(), "error listening") {
			t.Errorf("got %v, want a listen error", err)
		}
	})
}
