package main

import (
	"net/http"
	"sync/atomic"
)

// conflictCounter is an http.RoundTripper that counts the API's 409 answers. The client retries
// a 409 within one call, so the call's result says how many attempts it took but not why; under
// SERIALIZABLE a 409 is a request that ran out of retries of its serialization failures.
type conflictCounter struct {
	next      http.RoundTripper
	conflicts atomic.Int64
}

func (c *conflictCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusConflict {
		c.conflicts.Add(1)
	}
	return resp, err
}

// newHTTPClient returns the HTTP client that clients concurrent calls share, counting 409s.
func newHTTPClient(clients int) (*http.Client, *conflictCounter) {
	counter := &conflictCounter{next: newTransport(clients)}
	return &http.Client{Timeout: attemptTimeout, Transport: counter}, counter
}
