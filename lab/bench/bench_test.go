package main

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

func TestBench(t *testing.T) {
	t.Parallel()
	b := ridetest.Setup(t)
	logger := slog.New(slog.DiscardHandler)
	executor := phases.New(b.Pool, b.StripeClient, logger, phases.Config{})
	server := httptest.NewServer(api.NewServer(b.Pool, executor, logger, api.Config{Limits: api.Limits{Off: true}, TokenKey: ridetest.TokenKey}).Handler())
	t.Cleanup(server.Close)

	t.Run("BooksRidesAndReplaysThem", func(t *testing.T) {
		t.Parallel()
		// A count of calls, not a time, so that a loaded machine makes as many: a run of 4
		// clients' 20 calls without a replay has odds of 0.7^76, about one in 10^12.
		out := requireOK(t, "-api", server.URL, "-token", b.Rider.Token, "-clients", "4", "-calls", "20", "-duration", "10m", "-replay-share", "0.3")
		booked, replays := figure(t, out, "rides booked"), figure(t, out, "replays")
		if booked == 0 || replays == 0 {
			t.Fatalf("want rides booked and replayed, got:\n%s", out)
		}
		for _, label := range []string{"refusals", "unknown outcomes", "unexpected errors", "replay mismatches"} {
			if n := figure(t, out, label); n != 0 {
				t.Fatalf("want no %s, got %d:\n%s", label, n, out)
			}
		}
		if calls := figure(t, out, "requests"); calls != booked+replays {
			t.Fatalf("want %d calls (booked + replays), got %d:\n%s", booked+replays, calls, out)
		}
		for _, want := range []string{"rides/s", "409 answers", "latency, new keys", "latency, replays", "attempts per call"} {
			if !strings.Contains(out, want) {
				t.Fatalf("want %q in the table, got:\n%s", want, out)
			}
		}

		// What the table claims is what the database and Stripe hold: replays booked nothing.
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE user_id = $1 AND stripe_charge_id IS NOT NULL`, b.Rider.ID); n != booked {
			t.Fatalf("want %d charged rides, got %d", booked, n)
		}
		if n := len(b.SucceededCharges()); n != booked {
			t.Fatalf("want Stripe to hold %d charges, got %d", booked, n)
		}
	})

	t.Run("CountsDeclinedCardsAsRefusals", func(t *testing.T) {
		t.Parallel()
		out := requireOK(t, "-api", server.URL, "-token", b.DecliningRider.Token, "-clients", "2", "-calls", "20", "-duration", "10m", "-replay-share", "0.5")
		if figure(t, out, "refusals") == 0 || figure(t, out, "rides booked") != 0 || figure(t, out, "replays") == 0 {
			t.Fatalf("want refusals replayed and no rides, got:\n%s", out)
		}
	})

	t.Run("FailsOnUnexpectedErrors", func(t *testing.T) {
		t.Parallel()
		code, out, _ := runBench("-api", server.URL, "-token", "rr_not_a_token", "-clients", "2", "-duration", "10s")
		if code != exitFailed || figure(t, out, "unexpected errors") == 0 || !strings.Contains(out, "FAILURE ") {
			t.Fatalf("want exit %d with unexpected errors shown, got %d:\n%s", exitFailed, code, out)
		}
	})

	t.Run("FailsWhenTheAPIIsDown", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := runBench("-api", "http://127.0.0.1:1", "-token", "rr_x")
		if code != exitFailed || !strings.Contains(stderr, "is it running") {
			t.Fatalf("want exit %d saying the API is not reachable, got %d: %s", exitFailed, code, stderr)
		}
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{},
			{"-token", "rr_x", "-clients", "0"},
			{"-token", "rr_x", "-duration", "0s"},
			{"-token", "rr_x", "-replay-share", "1"},
			{"-token", "rr_x", "extra"},
			{"-token", "rr_x", "-rides", "10"},
			{"-compare", "-token", "rr_x"},
			{"-compare", "-replay-share", "0.1"},
			{"-compare", "-duration", "1500ms"},
			{"-compare", "-rides", "10", "-riders", "0"},
			{"-compare", "-receipts"},
			{"-receipts", "-clients", "2"},
			{"-receipts", "-token", "rr_x"},
			{"-receipts", "-bookings", "0"},
			{"-receipts", "-idle", "-1s"},
			{"-token", "rr_x", "-bookings", "3"},
			{"-compare", "-stripe-latency", "1s"},
			{"-compare", "-pin=sideways"},
			{"-token", "rr_x", "-pin"},
			{"-receipts", "-pin=both"},
			{"-compare", "-baseline", "no-such-revision"},
			{"-compare", "-baseline", "-rides"},
			{"-token", "rr_x", "-baseline", "HEAD"},
		} {
			if code, _, stderr := runBench(args...); code != exitUsage || stderr == "" {
				t.Fatalf("%v: want usage error, got %d", args, code)
			}
		}
	})
}
