package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// start runs the command with args until the returned stop is called, and returns the URL it
// printed.
func start(t *testing.T, args ...string) (url string, stop func() error) {
	t.Helper()
	return startWithEnv(t, nil, args...)
}

// startWithEnv is start with the environment variables env.
func startWithEnv(t *testing.T, env map[string]string, args ...string) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stdoutWriter := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return env[k] }, stdoutWriter, t.Output())
	}()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("error reading the URL: %v (run: %v)", err, <-done)
	}
	url = strings.TrimSpace(url)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q, want a loopback URL", url)
	}
	var stopped error
	var once sync.Once
	return url, func() error {
		once.Do(func() {
			cancel()
			stopped = <-done
		})
		return stopped
	}
}

// stripeClient is stripe-go pointed at url, without retries of its own.
func stripeClient(url string) *client.API {
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(url),
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:        &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := &client.API{}
	sc.Init("sk_test_cmd", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	return sc
}
