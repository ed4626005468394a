package bootstrap_test

import (
	"net"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
)

// TestListenNamesTheSetting: a port that another process holds fails with one line naming the
// variable that chose it.
func TestListenNamesTheSetting(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	_, err = bootstrap.Listen("METRICS_ADDR", taken.Addr().String())
	if err == nil {
		t.Fatal("want an error listening on a port in use")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "set METRICS_ADDR to a free port") || !strings.Contains(msg, taken.Addr().String()) {
		t.Fatalf("want one line naming the address and METRICS_ADDR, got %q", msg)
	}

	listener, err := bootstrap.Listen("PORT", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listener.Close()
}
