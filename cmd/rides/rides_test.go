package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestRides(t *testing.T) {
	t.Parallel()

	// api answers 503 once, then 201, recording the keys it saw.
	api := func(t *testing.T, final int) (*httptest.Server, *[]string) {
		var keys []string
		var calls atomic.Int32
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			if calls.Add(1) == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(final)
			if final == http.StatusCreated || final == http.StatusOK {
				fmt.Fprint(w, `{"message":"ok","ride":{"id":"3"}}`)
			} else {
				fmt.Fprint(w, `{"status":402,"code":"card_declined","detail":"Your card was declined."}`)
			}
		}))
		t.Cleanup(server.Close)
		return server, &keys
	}
	env := func(string) string { return "" }

	t.Run("Booked", func(t *testing.T) {
		t.Parallel()
		server, keys := api(t, http.StatusCreated)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-api", server.URL, "-token", "rr_x", "-from", "1,2", "-to", "3,4", "-key", "cli-test-key-0123456789"}, env, &stdout, &stderr)
		var out outcome
		_ = json.Unmarshal(stdout.Bytes(), &out)
		if code != exitBooked || out.Outcome != "booked" || out.Ride.ID != "3" || out.Attempts != 2 {
			t.Fatalf("want booked after 2 attempts, got %d %s %s", code, stdout.String(), stderr.String())
		}
		if (*keys)[0] != "cli-test-key-0123456789" || (*keys)[1] != (*keys)[0] {
			t.Fatalf("want the given key on every attempt, got %v", *keys)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		var paths []string
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			paths = append(paths, r.Method+" "+r.URL.Path)
			fmt.Fprint(w, `{"message":"ok","ride":{"id":"3","status":"cancelled","stripe_refund_id":"re_1"}}`)
		}))
		t.Cleanup(server.Close)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-api", server.URL, "-token", "rr_x", "-cancel", "3"}, env, &stdout, &stderr)
		var out outcome
		_ = json.Unmarshal(stdout.Bytes(), &out)
		if code != exitBooked || out.Outcome != "cancelled" || out.Ride.Status != "cancelled" || len(paths) != 1 || paths[0] != "POST /rides/3/cancel" {
			t.Fatalf("want ride 3 cancelled, got %d %s %s, requests %v", code, stdout.String(), stderr.String(), paths)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		server, _ := api(t, http.StatusPaymentRequired)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-api", server.URL, "-token", "rr_x", "-from", "1,2", "-to", "3,4"}, env, &stdout, &stderr)
		if code != exitRefused || !strings.Contains(stdout.String(), `"code":"card_declined"`) {
			t.Fatalf("want refused with card_declined, got %d %s", code, stdout.String())
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-api", "http://127.0.0.1:1", "-token", "rr_x", "-from", "1,2", "-to", "3,4", "-give-up-after", "1ms"}, env, &stdout, &stderr)
		if code != exitUnknown || !strings.Contains(stdout.String(), `"outcome":"unknown"`) || !strings.Contains(stdout.String(), `"idempotency_key":"`) {
			t.Fatalf("want an unknown outcome naming the key, got %d %s", code, stdout.String())
		}
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"-from", "1,2", "-to", "3,4"}, {"-token", "x", "-from", "north", "-to", "3,4"}, {"-token", "x", "-from", "1,2"}, {"-token", "x", "-cancel", "3", "-from", "1,2"}} {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), args, env, &stdout, &stderr); code != exitUsage || stderr.Len() == 0 {
				t.Fatalf("%v: want usage error, got %d", args, code)
			}
		}
	})
}
