package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// TestUnroutedRequests pins what a request that reaches no handler gets: a 405 naming the
// methods its path allows, or a 404, both problem+json. None of them needs the database, so the
// server has none.
func TestUnroutedRequests(t *testing.T) {
	t.Parallel()
	server := httptest.NewServer(api.NewServer(nil, nil, slog.New(slog.DiscardHandler), api.Config{}).Handler())
	t.Cleanup(server.Close)

	tests := []struct {
		name   string
		method string
		path   string
		status int
		allow  string // the Allow header a 405 must carry
	}{
		{"DeleteHealthz", http.MethodDelete, "/healthz", 405, "GET"},
		{"PostReadyz", http.MethodPost, "/readyz", 405, "GET"},
		{"GetRides", http.MethodGet, "/rides", 405, "POST"},
		{"PutRide", http.MethodPut, "/rides/42", 405, "GET"},
		{"OptionsRides", http.MethodOptions, "/rides", 405, "POST"},
		{"UnknownMethodOnARoute", "FROB", "/rides", 405, "POST"},
		{"UnknownMethodNowhere", "FROB", "/nowhere", 404, ""},
		{"GetNowhere", http.MethodGet, "/nowhere", 404, ""},
		{"TrailingSlash", http.MethodPost, "/rides/", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(tt.method, server.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := server.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}

			if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow {
				t.Fatalf("want %d with Allow %q, got %d with Allow %q: %s",
					tt.status, tt.allow, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != problem.ContentType {
				t.Fatalf("want %s, got %q: %s", problem.ContentType, ct, body)
			}
			var p problem.Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("error decoding problem %s: %s", body, err)
			}
			want := problem.CodeNotFound
			if tt.status == 405 {
				want = problem.CodeMethodNotAllowed
			}
			if p.Status != tt.status || p.Code != want || p.Detail == "" || p.RequestID == "" {
				t.Fatalf("want a complete %d %s problem, got %s", tt.status, want, body)
			}
		})
	}

	// A HEAD gets the same status and Allow, with no body to check.
	resp, err := server.Client().Head(server.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" {
		t.Fatalf("HEAD /healthz: want 405 with Allow GET, got %d with %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
