package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/rocketrides/rocketrides/internal/cli"
)

func TestWebhooks(t *testing.T) {
	t.Parallel()

	t.Run("DeliversSignedEventsWhereTheEnvironmentSays", func(t *testing.T) {
		t.Parallel()
		const secret = "whsec_cmd"
		events := make(chan stripe.Event, 10)
		endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			ev, err := webhook.ConstructEventWithOptions(body, r.Header.Get("Stripe-Signature"), secret, webhook.ConstructEventOptions{})
			if err != nil {
				t.Errorf("stripe-go refused the delivery: %v", err)
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			select {
			case events <- ev:
			default: // more than the test reads
			}
		}))
		t.Cleanup(endpoint.Close)
		env := map[string]string{"STRIPE_WEBHOOK_URL": endpoint.URL + "/webhooks", "STRIPE_WEBHOOK_SECRET": secret}
		url, stop := startWithEnv(t, env, "-addr", "127.0.0.1:0")

		ch, err := stripeClient(url).Charges.New(&stripe.ChargeParams{
			Amount:   stripe.Int64(2000),
			Currency: stripe.String("usd"),
			Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
		})
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}
		select {
		case ev := <-events:
			if ev.Type != stripe.EventTypeChargeSucceeded || ev.GetObjectValue("id") != ch.ID {
				t.Errorf("got event %s for %s, want charge.succeeded for %s", ev.Type, ev.GetObjectValue("id"), ch.ID)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("gave up waiting for the charge.succeeded delivery")
		}
		if err := stop(); err != nil {
			t.Errorf("run returned %v after cancellation, want nil", err)
		}
	})

	t.Run("ReadsItsSettings", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			env            map[string]string
			endpoint, bad  string
			wantUsageError bool
		}{
			{env: nil},
			{env: map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_x"}},
			{env: map[string]string{"STRIPE_WEBHOOK_URL": "http://127.0.0.1:5004/webhooks", "STRIPE_WEBHOOK_SECRET": "whsec_x"}, endpoint: "http://127.0.0.1:5004/webhooks"},
			{env: map[string]string{"STRIPE_WEBHOOK_URL": "http://127.0.0.1:5004/webhooks"}, bad: "STRIPE_WEBHOOK_SECRET"},
			{env: map[string]string{"STRIPE_WEBHOOK_URL": "127.0.0.1:5004/webhooks", "STRIPE_WEBHOOK_SECRET": "whsec_x"}, bad: "STRIPE_WEBHOOK_URL"},
		} {
			endpoint, secret, err := webhookSettings(func(k string) string { return c.env[k] })
			var usage *cli.UsageError
			switch {
			case c.bad != "" && (!errors.As(err, &usage) || !strings.Contains(err.Error(), c.bad)):
				t.Errorf("%v: got %v, want a usage error naming %s", c.env, err, c.bad)
			case c.bad == "" && (err != nil || endpoint != c.endpoint || (endpoint != "" && secret != "whsec_x")):
				t.Errorf("%v: got %q, %q, %v; want %q", c.env, endpoint, secret, err, c.endpoint)
			}
		}
	})

	t.Run("LogsWhereEventsGo", func(t *testing.T) {
		t.Parallel()
		for endpoint, want := range map[string]string{"": "webhooks off", "http://127.0.0.1:5004/webhooks": "http://127.0.0.1:5004/webhooks"} {
			var buf bytes.Buffer
			logWebhooks(t.Context(), slog.New(slog.NewTextHandler(&buf, nil)), endpoint)
			if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, want) {
				t.Errorf("logged %q, want one line with %q", got, want)
			}
		}
	})
}
