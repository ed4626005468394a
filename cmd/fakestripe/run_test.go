package main

import (
	"io"
	"net"
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

	t.Run("ListensWhereTheProcessesLook", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			env           map[string]string
			setting, addr string
		}{
			{map[string]string{"STRIPE_API_URL": "http://127.0.0.1:5704", "PORT": "5004"}, "STRIPE_API_URL", "127.0.0.1:5704"},
			{map[string]string{"PORT": "7000"}, "PORT", "127.0.0.1:7000"},
			{nil, "-addr", "127.0.0.1:12111"},
		} {
			setting, addr, err := listenAddr(func(k string) string { return c.env[k] })
			if err != nil || setting != c.setting || addr != c.addr {
				t.Errorf("%v: got %s %s (%v), want %s %s", c.env, setting, addr, err, c.setting, c.addr)
			}
		}
		if _, _, err := listenAddr(func(k string) string { return map[string]string{"STRIPE_API_URL": "https://api.stripe.com"}[k] }); err == nil {
			t.Error("want Stripe's own URL refused as a place to listen")
		}
	})

	t.Run("PortInUseNamesTheSetting", func(t *testing.T) {
		t.Parallel()
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		env := map[string]string{"STRIPE_API_URL": "http://" + taken.Addr().String()}

		err = run(t.Context(), nil, func(k string) string { return env[k] }, io.Discard, io.Discard)

		if err == nil || !strings.Contains(err.Error(), "set STRIPE_API_URL to a free port") || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v, want one line naming STRIPE_API_URL", err)
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
