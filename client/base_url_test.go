package client

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/rocketrides/rocketrides/api"
)

// TestDefaultBaseURL holds the client tools' default address to the port the API listens on
// when PORT is unset, so that a change to one cannot leave the other behind.
func TestDefaultBaseURL(t *testing.T) {
	u, err := url.Parse(DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(api.PortDefault); u.Scheme != "http" || u.Hostname() != "localhost" || u.Port() != want {
		t.Errorf("want DefaultBaseURL at http://localhost:%s, api.PortDefault, got %q", want, DefaultBaseURL)
	}
}
