package api_test

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/client"
)

// TestClientDefaultBaseURL holds the client tools' default address (cmd/rides, lab/bench) to
// the port the API listens on when PORT is unset, so that a change to one cannot leave the other
// behind.
func TestClientDefaultBaseURL(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(client.DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(api.PortDefault); u.Scheme != "http" || u.Hostname() != "localhost" || u.Port() != want {
		t.Errorf("want client.DefaultBaseURL at http://localhost:%s, api.PortDefault, got %q", want, client.DefaultBaseURL)
	}
}
