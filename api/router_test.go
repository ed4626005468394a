package api_test

import (
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
		{"DeleteRides", http.MethodDelete, "/rides", 405, "GET, POST"},
		{"PutRide", http.MethodPut, "/rides/42", 405, "GET"},
		{"OptionsRides", http.MethodOptions, "/rides", 405, "GET, POST"},
		{"UnknownMethodOnARoute", "FROB", "/rides", 405, "GET, POST"},
		{"UnknownMethodNowhere", "FROB", "/nowhere", 404, ""},
		{"GetNowhere", http.MethodGet, "/nowhere", 404, ""},
		{"TrailingSlash", http.MethodPost, "/rides/", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := doRequest(t, server, tt.method, tt.path, http.Header{}, "")
			if resp.status != tt.status || resp.header.Get("Allow") != tt.allow {
				t.Fatalf("want %d with Allow %q, got %d with Allow %q: %s",
					tt.status, tt.allow, resp.status, resp.header.Get("Allow"), resp.body)
			}
			want := problem.CodeNotFound
			if tt.status == 405 {
				want = problem.CodeMethodNotAllowed
			}
			resp.requireProblem(t, tt.status, want)
		})
	}

	// A HEAD gets the same status and Allow, with no body to check.
	resp := doRequest(t, server, http.MethodHead, "/healthz", http.Header{}, "")
	if resp.status != 405 || resp.header.Get("Allow") != "GET" {
		t.Fatalf("HEAD /healthz: want 405 with Allow GET, got %d with %q", resp.status, resp.header.Get("Allow"))
	}
}
