package fakestripe_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// openJournaled opens a stand-in on the journal at path, serves it on a loopback port until the
// test ends, and returns it with a client.
func openJournaled(t *testing.T, path string) (*fakestripe.Server, *testBundle) {
	t.Helper()
	s, err := fakestripe.Open(path, fakestripe.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("error opening the journal: %v", err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		hs.Close()
		if err := s.CloseJournal(); err != nil {
			t.Errorf("error closing the journal: %v", err)
		}
	})
	return s, &testBundle{stripe: newStripeClient(t, hs.URL, testAPIKey, &http.Transport{})}
}

// stopJournaled stops a stand-in as its process would at exit: it answers no more requests and
// its journal is closed.
func stopJournaled(t *testing.T, s *fakestripe.Server) {
	t.Helper()
	if err := s.CloseJournal(); err != nil {
		t.Fatal(err)
	}
}

func TestJournal(t *testing.T) {
	t.Parallel()

	t.Run("AStandInStartedAgainKeepsCustomersChargesAndKeys", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		first, b := openJournaled(t, path)
		rider := b.createCustomer(t, "tok_visa")
		declined := b.createCustomer(t, "tok_chargeCustomerFail")
		charge, err := b.stripe.Charges.New(rideChargeParams(rider.ID, "ride-1"))
		if err != nil {
			t.Fatal(err)
		}
		stopJournaled(t, first)

		second, b := openJournaled(t, path)
		// The rider's next booking is charged, not refused with "No such customer".
		if _, err := b.stripe.Charges.New(rideChargeParams(rider.ID, "ride-2")); err != nil {
			t.Fatalf("want the rider's customer kept, got %v", err)
		}
		// A retry of the first charge replays it rather than charging again.
		again, err := b.stripe.Charges.New(rideChargeParams(rider.ID, "ride-1"))
		if err != nil || again.ID != charge.ID || !replayed(again.LastResponse) {
			t.Fatalf("want charge %s replayed, got %v (replayed %t), %v", charge.ID, again, again != nil && replayed(again.LastResponse), err)
		}
		if got, err := b.stripe.Charges.Get(charge.ID, nil); err != nil || got.Amount != 2000 || got.Customer.ID != rider.ID {
			t.Fatalf("want the first charge kept, got %+v, %v", got, err)
		}
		// The declined rider's card still declines: a card keeps its behaviour.
		_, err = b.stripe.Charges.New(rideChargeParams(declined.ID, "ride-3"))
		requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)

		charges := second.Charges()
		if len(charges) != 3 || charges[0].ID != charge.ID || charges[0].IdempotencyKey != "ride-1" {
			t.Fatalf("want the first charge and two new ones, oldest first, got %+v", charges)
		}
	})

	t.Run("HoldsNoAPIKey", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		_, b := openJournaled(t, path)
		cus := b.createCustomer(t, "tok_visa")
		if _, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-1")); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(string(data), "\n"); lines != 2 || strings.Contains(string(data), testAPIKey) {
			t.Fatalf("want two lines and no API key, got:\n%s", data)
		}
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("want the journal readable by its owner only, got %v, %v", info.Mode(), err)
		}
	})

	t.Run("DropsALastLineCutShort", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		first, b := openJournaled(t, path)
		cus := b.createCustomer(t, "tok_visa")
		stopJournaled(t, first)
		appendFile(t, path, `{"customer":{"id":"cus_cut`)

		second, b := openJournaled(t, path)
		if _, err := b.stripe.Customers.Get(cus.ID, nil); err != nil {
			t.Fatalf("want the whole lines read, got %v", err)
		}
		later := b.createCustomer(t, "tok_visa")
		stopJournaled(t, second)

		// What follows the cut is written where it was, so that the file reads whole again.
		third, b := openJournaled(t, path)
		for _, id := range []string{cus.ID, later.ID} {
			if _, err := b.stripe.Customers.Get(id, nil); err != nil {
				t.Fatalf("want customer %s kept, got %v", id, err)
			}
		}
		stopJournaled(t, third)
	})

	t.Run("AWholeLineItCannotReadFails", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		appendFile(t, path, "{\"customer\":{\"id\":\"cus_1\",\"created\":\"2025-01-01T00:00:00Z\"}}\nnot json\n")

		_, err := fakestripe.Open(path, fakestripe.Options{})

		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Fatalf("want an error naming line 2, got %v", err)
		}
	})

	t.Run("OneStandInAtATime", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		first, _ := openJournaled(t, path)

		if _, err := fakestripe.Open(path, fakestripe.Options{}); err == nil || !strings.Contains(err.Error(), "another stand-in") {
			t.Fatalf("want a second stand-in on the journal refused, got %v", err)
		}
		stopJournaled(t, first)
		_, _ = openJournaled(t, path) // free once the first closed it
	})

	t.Run("ResetEmptiesIt", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		first, b := openJournaled(t, path)
		cus := b.createCustomer(t, "tok_visa")
		first.Reset()
		kept := b.createCustomer(t, "tok_visa")
		stopJournaled(t, first)

		_, b = openJournaled(t, path)
		if _, err := b.stripe.Customers.Get(cus.ID, nil); err == nil {
			t.Fatal("want the customer made before Reset forgotten")
		}
		if _, err := b.stripe.Customers.Get(kept.ID, nil); err != nil {
			t.Fatalf("want the customer made after Reset kept, got %v", err)
		}
	})
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
