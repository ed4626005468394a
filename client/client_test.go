package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"
)

// scripted is an API stand-in that answers each attempt with the next scripted answer and
// records the Idempotency-Key of every attempt.
type scripted struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	keys    []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	answer := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	s.mu.Unlock()
	answer(w)
}

func status(code int, problemCode string, headers ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if code == http.StatusCreated {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprint(w, `{"message":"ok","ride":{"id":"7","stripe_charge_id":"ch_1"}}`)
			return
		}
		if code == http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprint(w, `{"message":"ok","ride":{"id":"7","stripe_charge_id":"ch_1","status":"cancelled","stripe_refund_id":"re_1"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"status":%d,"code":%q,"title":"t","detail":"d"}`, code, problemCode)
	}
}

// hangUp closes the connection without an answer, as a dropped network would.
func hangUp(w http.ResponseWriter) {
	conn, _, _ := w.(http.Hijacker).Hijack()
	conn.Close()
}

func setup(t *testing.T, answers ...func(w http.ResponseWriter)) (*Client, *scripted, *[]time.Duration) {
	t.Helper()
	s := &scripted{answers: answers}
	server := httptest.NewServer(s)
	t.Cleanup(server.Close)
	var waits []time.Duration
	clock := time.Now()
	c := &Client{BaseURL: server.URL, Token: "rr_test", MaxElapsed: time.Hour}
	c.now = func() time.Time { return clock }
	c.sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		clock = clock.Add(d)
		return nil
	}
	return c, s, &waits
}

var params = RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4}

func TestCreateRide(t *testing.T) {
	t.Parallel()

	t.Run("RetriesWithTheSameKeyUntilCreated", func(t *testing.T) {
		t.Parallel()
		c, s, waits := setup(t, hangUp, status(409, "idempotency_key_in_use", "Retry-After", "1"),
			status(500, "internal_error"), status(503, "payment_processor_unavailable", "Retry-After", "5"),
			status(201, "", "Idempotent-Replayed", "true"))

		result, err := c.CreateRide(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if result.Ride.ID != "7" || !result.Replayed || result.Attempts != 5 {
			t.Fatalf("unexpected result %+v", result)
		}
		if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(result.IdempotencyKey) {
			t.Fatalf("want a UUIDv4 key, got %q", result.IdempotencyKey)
		}
		for _, key := range s.keys {
			if key != result.IdempotencyKey {
				t.Fatalf("want every attempt sent with one key, got %v", s.keys)
			}
		}
		// Retry-After is a floor under the jittered backoff.
		if len(*waits) != 4 || (*waits)[1] < time.Second || (*waits)[3] < 5*time.Second {
			t.Fatalf("want 4 waits honouring Retry-After, got %v", *waits)
		}
	})

	for _, code := range []int{400, 401, 402, 413, 415, 422} {
		t.Run(fmt.Sprintf("NeverRetries%d", code), func(t *testing.T) {
			t.Parallel()
			c, s, _ := setup(t, status(code, "some_code"), status(201, ""))
			_, err := c.CreateRide(context.Background(), params)
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != code || apiErr.Code != "some_code" || len(s.keys) != 1 {
				t.Fatalf("want one attempt and a %d APIError, got %v after %d attempts", code, err, len(s.keys))
			}
		})
	}

	t.Run("WaitsOutRateLimitsAndShedding", func(t *testing.T) {
		t.Parallel()
		c, s, waits := setup(t, status(429, "booking_rate_limited", "Retry-After", "7"),
			status(503, "service_unavailable", "Retry-After", "2"), status(201, ""))
		result, err := c.CreateRide(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if result.Attempts != 3 || s.keys[0] != s.keys[1] || s.keys[1] != s.keys[2] {
			t.Fatalf("want three attempts with one key, got %d: %v", result.Attempts, s.keys)
		}
		if len(*waits) != 2 || (*waits)[0] < 7*time.Second || (*waits)[1] < 2*time.Second {
			t.Fatalf("want each wait at least its Retry-After, got %v", *waits)
		}
	})

	t.Run("StoredErrorIsFinal", func(t *testing.T) {
		t.Parallel()
		c, s, _ := setup(t, status(500, "payment_needs_review", "Idempotent-Replayed", "true"), status(201, ""))
		_, err := c.CreateRideWithKey(context.Background(), "my-own-key-0123456789", params)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || !apiErr.Replayed || len(s.keys) != 1 || s.keys[0] != "my-own-key-0123456789" {
			t.Fatalf("want the stored error returned at once, got %v after %d attempts", err, len(s.keys))
		}
	})

	t.Run("DeclineCarriesItsReason", func(t *testing.T) {
		t.Parallel()
		c, _, _ := setup(t, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusPaymentRequired)
			fmt.Fprint(w, `{"status":402,"code":"card_declined","title":"Card declined","detail":"Your card has insufficient funds.","decline_code":"insufficient_funds"}`)
		})
		_, err := c.CreateRide(context.Background(), params)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != "card_declined" || apiErr.DeclineCode != "insufficient_funds" {
			t.Fatalf("want a card_declined error with its decline code, got %#v", err)
		}
	})

	t.Run("GivesUpAfterTheDeadlineWithOutcomeUnknown", func(t *testing.T) {
		t.Parallel()
		c, s, _ := setup(t, status(503, "payment_processor_unavailable", "Retry-After", "30"))
		c.MaxElapsed = time.Minute
		_, err := c.CreateRide(context.Background(), params)
		var unknown *UnknownOutcomeError
		if !errors.As(err, &unknown) || unknown.IdempotencyKey == "" || unknown.Attempts != len(s.keys) {
			t.Fatalf("want an UnknownOutcomeError naming the key, got %v", err)
		}
		// Retry-After makes every wait 30 s: attempts at 0, 30 and 60 s; a fourth would come
		// after the minute.
		if len(s.keys) != 3 {
			t.Fatalf("want 3 attempts within a minute of 30 s waits, got %d", len(s.keys))
		}
	})

	t.Run("BackoffIsCappedFullJitter", func(t *testing.T) {
		t.Parallel()
		c := &Client{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
		for attempt := 1; attempt < 40; attempt++ {
			ceiling := min(time.Second, 100*time.Millisecond<<min(attempt-1, 20))
			for range 50 {
				if d := c.backoff(attempt); d <= 0 || d > ceiling {
					t.Fatalf("attempt %d: backoff %s outside (0, %s]", attempt, d, ceiling)
				}
			}
		}
	})
}

func TestReads(t *testing.T) {
	t.Parallel()
	ride := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ride":{"id":"7","stripe_charge_id":"ch_1","receipt_sent_at":"2026-11-26T10:00:00Z"}}`)
	}

	t.Run("GetRideRetriesWhatMayChange", func(t *testing.T) {
		t.Parallel()
		c, s, waits := setup(t, status(503, "service_unavailable", "Retry-After", "2"), hangUp, status(429, "booking_rate_limited"), ride)
		got, err := c.GetRide(t.Context(), "7")
		if err != nil || got.ID != "7" || got.ReceiptSentAt == nil {
			t.Fatalf("want ride 7 with its receipt time, got %+v, %v", got, err)
		}
		// Go's transport resends a GET that met a closed connection by itself, without a wait.
		if len(s.keys) != 4 || len(*waits) < 2 || (*waits)[0] < 2*time.Second {
			t.Fatalf("want 4 attempts, the first wait at least Retry-After, got %d attempts, waits %v", len(s.keys), *waits)
		}
	})
	t.Run("GetRideNotFoundIsFinal", func(t *testing.T) {
		t.Parallel()
		c, s, _ := setup(t, status(404, "not_found"))
		_, err := c.GetRide(t.Context(), "1")
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != "not_found" || len(s.keys) != 1 {
			t.Fatalf("want one attempt and a not_found APIError, got %v after %d", err, len(s.keys))
		}
	})
	t.Run("ListRidesSendsThePage", func(t *testing.T) {
		t.Parallel()
		var query string
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			query = r.URL.RawQuery
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","url":"/rides","data":[{"id":"9"},{"id":"8"}],"has_more":true}`)
		}))
		t.Cleanup(server.Close)
		c := &Client{BaseURL: server.URL, Token: "rr_test"}
		list, err := c.ListRides(t.Context(), ListParams{Limit: 2, StartingAfter: "10"})
		if err != nil || len(list.Rides) != 2 || list.Rides[0].ID != "9" || !list.HasMore || query != "limit=2&starting_after=10" {
			t.Fatalf("want the page of two with has_more, asked with limit and starting_after, got %+v, %v (query %q)", list, err, query)
		}
	})
}

func TestCancelRide(t *testing.T) {
	t.Parallel()

	t.Run("RetriesUnderOneKey", func(t *testing.T) {
		t.Parallel()
		c, s, _ := setup(t, hangUp, status(http.StatusServiceUnavailable, "payment_processor_unavailable", "Retry-After", "1"),
			status(http.StatusOK, ""))
		res, err := c.CancelRide(context.Background(), "7")
		if err != nil {
			t.Fatal(err)
		}
		if res.Ride.Status != "cancelled" || res.Ride.StripeRefundID == nil || *res.Ride.StripeRefundID != "re_1" || res.Attempts != 3 {
			t.Fatalf("want the cancelled ride on the third attempt, got %+v after %d", res.Ride, res.Attempts)
		}
		if len(s.keys) != 3 || s.keys[0] != s.keys[1] || s.keys[1] != s.keys[2] || s.keys[0] == "" {
			t.Fatalf("want every attempt under one key, got %q", s.keys)
		}
	})

	// A ride that cannot be cancelled is the key's stored answer: retrying only replays it.
	for _, code := range []string{"ride_already_cancelled", "ride_already_refunded", "ride_disputed", "ride_not_charged"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			c, s, _ := setup(t, status(http.StatusConflict, code), status(http.StatusOK, ""))
			_, err := c.CancelRideWithKey(context.Background(), "cancel-key-0123456789abcdef", "7")
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Code != code || len(s.keys) != 1 {
				t.Fatalf("want %s at once, got %v after %d attempts", code, err, len(s.keys))
			}
		})
	}
}
