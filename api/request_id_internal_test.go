package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
)

func TestValidRequestID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id    string
		valid bool
	}{
		{"a", true},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", true},
		{"req_ABCDEFGHIJKLMNOPQRSTUVWXYZ", false}, // looks made by the API
		{"REQ_ABCDEFGHIJKLMNOPQRSTUVWXYZ", true},
		{"request-42", true},
		{"Root.1:x_y-z", true},
		{strings.Repeat("x", requestIDMaxLen), true},
		{"", false},
		{strings.Repeat("x", requestIDMaxLen+1), false},
		{"a b", false},
		{"a\tb", false},
		{"a\nb", false},
		{`a"b`, false},
		{"a=b", false},
		{"a/b", false},
		{"\u00e9", false},
	}
	for _, tt := range tests {
		if got := validRequestID(tt.id); got != tt.valid {
			t.Errorf("validRequestID(%q): want %t, got %t", tt.id, tt.valid, got)
		}
	}
	if id := newRequestID(); !strings.HasPrefix(id, requestIDPrefix) || !validRequestID(strings.TrimPrefix(id, requestIDPrefix)) {
		t.Errorf("want a made-up id to be the prefix and a valid id, got %q", id)
	}
}

func TestRequestIDOnAPanic(t *testing.T) {
	t.Parallel()
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	h := s.assignRequestID(s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	})))

	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(requestIDHeader, "panicking-request")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	var p problem.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusInternalServerError || rec.Header().Get(requestIDHeader) != "panicking-request" || p.RequestID != "panicking-request" {
		t.Fatalf("want a 500 carrying the request id in header and body, got %d %q %s",
			rec.Code, rec.Header().Get(requestIDHeader), rec.Body)
	}
}
