package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestQuickStart books a ride with the curl request of docs/operations.md's "By hand" steps,
// replays it, and stops the API.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	s := setup(t)

	status, replayed, first := s.postRide(t)
	if status != http.StatusCreated || replayed != "" || !strings.Contains(first, `"stripe_charge_id":"ch_`) {
		t.Fatalf("want 201 with a charged ride, got %d %s", status, first)
	}
	status, replayed, second := s.postRide(t)
	if status != http.StatusCreated || replayed != "true" || second != first {
		t.Fatalf("want the 201 replayed, got %d %q %s", status, replayed, second)
	}

	// docs/api.md's `curl http://localhost:5004/openapi.yaml`.
	resp, err := http.Get(s.base + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	contract, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" || !strings.Contains(string(contract), "\nopenapi: 3.1") {
		t.Fatalf("want the contract served as YAML, got %d %q: %.60s", resp.StatusCode, resp.Header.Get("Content-Type"), contract)
	}
	s.stop(t)
}
