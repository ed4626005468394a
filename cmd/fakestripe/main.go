// Command fakestripe runs the Stripe stand-in of internal/testing/fakestripe as its own process, so that
// Rocket Rides' processes and tests in other processes (a chaos test) can share one Stripe. Point
// stripe-go at the URL it prints; drive its faults through the control API under /_fakestripe/.
//
//	go run ./cmd/fakestripe                   # on 127.0.0.1:12111; or -addr 127.0.0.1:0
//	foreman run bin/fakestripe -journal .data/fakestripe.jsonl   # where .env's STRIPE_API_URL says
//
// It listens on -addr if given; else where STRIPE_API_URL says, which is where the processes
// that share its environment look for it; else on PORT; else on stripe-mock's 12111.
//
// Its customers and charges live in memory unless -journal names a file to keep them in, which a
// database kept between runs needs: the riders it holds are the stand-in's customers.
//
// It delivers webhook events (charge.succeeded, charge.refunded, charge.dispute.created) to
// STRIPE_WEBHOOK_URL, an http or https URL, signed with STRIPE_WEBHOOK_SECRET as Stripe signs them
// (the secret the receiving process verifies with; required with the URL), and retries each until
// answered 2xx. Unset, it delivers none. The control API duplicates, reorders and delays
// deliveries, and refunds or disputes charges as the dashboard and a rider's bank would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/connguard"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// defaultPort is stripe-mock's port, so that either can stand in for Stripe at the same URL.
const defaultPort = "12111"

func main() {
	cli.Main("fakestripe", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}

// run serves the stand-in until ctx ends. It prints the base URL alone on a line to stdout so
// that a parent process can read it, which matters with port 0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := bootstrap.LoadConfig(getenv)
	if err != nil {
		return err
	}
	setting, defaultAddr, err := listenAddr(getenv)
	if err != nil {
		return err
	}
	flags := flag.NewFlagSet("fakestripe", flag.ContinueOnError)
	flags.SetOutput(stderr)
	addr := flags.String("addr", defaultAddr, "address to listen on; overrides STRIPE_API_URL and PORT")
	journalPath := flags.String("journal", "", "keep customers, charges and idempotent results in this file, and read back what it holds (default: in memory only)")
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("error parsing flags: %w", err)
	}

	webhookURL, webhookSecret, err := webhookSettings(getenv)
	if err != nil {
		return err
	}

	logger := bootstrap.NewLogger(stderr, cfg)
	fake, err := newServer(*journalPath, fakestripe.Options{Logger: logger, WebhookURL: webhookURL, WebhookSecret: webhookSecret})
	if err != nil {
		return err
	}
	flags.Visit(func(f *flag.Flag) {
		if f.Name == "addr" {
			setting = "-addr"
		}
	})
	listener, err := bootstrap.Listen(setting, *addr)
	if err != nil {
		return errors.Join(err, fake.CloseJournal())
	}
	url := "http://" + listener.Addr().String()
	fmt.Fprintln(stdout, url)
	logger.InfoContext(ctx, "Fakestripe: listening", slog.String("url", url))
	logWebhooks(ctx, logger, webhookURL)

	// Release requests held by timeout faults as soon as shutdown starts, or draining would
	// wait for them until the shutdown timeout.
	context.AfterFunc(ctx, fake.Close)
	// Every client of the stand-in is one of this machine's API processes, each with as many
	// connections as it has charges in flight: no cap per address.
	guard := connguard.New(connguard.Limits{MaxConnsPerAddr: -1})
	err = bootstrap.ServeHTTP(ctx, listener, fake, guard, logger, nil)
	fake.Close() // returns once webhook deliveries have stopped, which AfterFunc may not have waited for
	return errors.Join(err, fake.CloseJournal())
}

// newServer returns the stand-in, kept in the journal at journalPath if set.
func newServer(journalPath string, opts fakestripe.Options) (*fakestripe.Server, error) {
	if journalPath == "" {
		return fakestripe.New(opts), nil
	}
	if err := os.MkdirAll(filepath.Dir(journalPath), 0o755); err != nil {
		return nil, fmt.Errorf("error creating the journal's directory: %w", err)
	}
	return fakestripe.Open(journalPath, opts)
}

// listenAddr returns where the stand-in listens unless -addr says, and the variable that said
// so: STRIPE_API_URL's host and port, PORT on loopback, or loopback's defaultPort.
func listenAddr(getenv func(string) string) (setting, addr string, err error) {
	if v := getenv("STRIPE_API_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "http" || u.Port() == "" {
			return "", "", &cli.UsageError{Err: fmt.Errorf("STRIPE_API_URL %q: the stand-in serves plain http on a port the URL names, as in http://127.0.0.1:%s", v, defaultPort)}
		}
		return "STRIPE_API_URL", u.Host, nil
	}
	if port := getenv("PORT"); port != "" { // LoadConfig checked it
		return "PORT", net.JoinHostPort("127.0.0.1", port), nil
	}
	return "-addr", net.JoinHostPort("127.0.0.1", defaultPort), nil
}

// webhookSettings returns where webhook events go and the secret that signs them:
// STRIPE_WEBHOOK_URL, an absolute http or https URL, and STRIPE_WEBHOOK_SECRET, which it needs.
// An unset URL delivers none.
func webhookSettings(getenv func(string) string) (endpoint, secret string, err error) {
	v, secret := getenv("STRIPE_WEBHOOK_URL"), getenv("STRIPE_WEBHOOK_SECRET")
	if v == "" {
		return "", "", nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", &cli.UsageError{Err: fmt.Errorf("STRIPE_WEBHOOK_URL %q: want the http or https URL of a webhook endpoint, as in http://127.0.0.1:5004/webhooks/stripe", v)}
	}
	if secret == "" {
		return "", "", &cli.UsageError{Err: errors.New("STRIPE_WEBHOOK_URL is set but STRIPE_WEBHOOK_SECRET is not: set it to the secret the endpoint verifies signatures with, as in whsec_rocketrides")}
	}
	return v, secret, nil
}

// logWebhooks says in one line where webhook events go, or that they go nowhere.
func logWebhooks(ctx context.Context, logger *slog.Logger, webhookURL string) {
	if webhookURL == "" {
		logger.InfoContext(ctx, "Fakestripe: webhooks off; set STRIPE_WEBHOOK_URL and STRIPE_WEBHOOK_SECRET to deliver events")
		return
	}
	logger.InfoContext(ctx, "Fakestripe: delivering webhook events", slog.String("webhook_url", webhookURL))
}
