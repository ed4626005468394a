package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestExitStatus runs the client commands of docs/api.md: the built binary's exit status tells
// booked, refused, bad usage and unknown apart, while go run reports every failure as its own
// status 1.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPaymentRequired)
		fmt.Fprint(w, `{"status":402,"code":"card_declined","decline_code":"insufficient_funds","detail":"Your card has insufficient funds."}`)
	}))
	t.Cleanup(refusing.Close)
	ride := []string{"-token", "rr_x", "-from", "37.7749,-122.4194", "-to", "37.3382,-121.8863"}
	unreachable := append([]string{"-api", "http://127.0.0.1:1", "-give-up-after", "1ms"}, ride...)

	t.Run("BuiltBinary", func(t *testing.T) {
		t.Parallel()
		rides := proctest.Build(t, "rides")
		for _, c := range []struct {
			name string
			args []string
			code int
		}{
			{"Refused", append([]string{"-api", refusing.URL}, ride...), exitRefused},
			{"Usage", []string{"-token", "rr_x"}, exitUsage},
			{"Unknown", unreachable, exitUnknown},
		} {
			stdout, stderr, code := proctest.Run(t, rides, nil, c.args...)
			if code != c.code {
				t.Errorf("%s: want exit status %d, got %d: %s%s", c.name, c.code, code, stdout, stderr)
			}
			// A decline says why, as the card's issuer put it, for the app to show its rider.
			if c.code == exitRefused && !strings.Contains(stdout, `"decline_code":"insufficient_funds"`) {
				t.Errorf("%s: want the decline_code in the outcome, got %s", c.name, stdout)
			}
		}
	})

	t.Run("GoRunHidesIt", func(t *testing.T) {
		t.Parallel()
		// Go's settings of this test's environment (GOCACHE, GOFLAGS, ...), as a user's shell has them.
		var goEnv []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "GO") {
				goEnv = append(goEnv, kv)
			}
		}
		stdout, stderr, code := proctest.Run(t, "go", goEnv, append([]string{"run", "."}, unreachable...)...)
		if code != 1 || !strings.Contains(stderr, "exit status 3") || !strings.Contains(stdout, `"outcome":"unknown"`) {
			t.Fatalf("want go run to exit 1 saying exit status 3, got %d: %s%s", code, stdout, stderr)
		}
	})
}
