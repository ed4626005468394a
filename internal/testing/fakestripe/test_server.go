package fakestripe

import (
	"net/http/httptest"
	"testing"
)

// TestServer is a Server listening on a loopback port for the length of one test.
type TestServer struct {
	*Server

	// URL is the base URL to give stripe-go as BackendConfig.URL, e.g. "http://127.0.0.1:41234".
	URL string
}

// NewTestServer starts a Server on 127.0.0.1 with a free port and stops it when the test ends,
// releasing any request a fault still holds so that the test does not wait on it.
func NewTestServer(tb testing.TB, opts Options) *TestServer {
	tb.Helper()
	s := New(opts)
	hs := httptest.NewServer(s)
	tb.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return &TestServer{Server: s, URL: hs.URL}
}
