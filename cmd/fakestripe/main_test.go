package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("ServesStripeUntilCancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		stdout, stdoutWriter := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, func(string) string { return "" }, stdoutWriter, t.Output())
		}()

		url, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatalf("error reading the URL: %v", err)
		}
		url = strings.TrimSpace(url)
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("printed %q, want a loopback URL", url)
		}

		backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
			URL:               stripe.String(url),
			MaxNetworkRetries: stripe.Int64(0),
			HTTPClient:        &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
			LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		})
		sc := &client.API{}
		sc.Init("sk_test_cmd", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
		ch, err := sc.Charges.New(&stripe.ChargeParams{
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

		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v after cancellation, want nil", err)
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
