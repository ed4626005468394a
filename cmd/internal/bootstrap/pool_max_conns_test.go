package bootstrap

import (
	"log/slog"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/workers"
)

// TestPoolMaxConnsAtLeast sizes the pool of a process that needs more connections than the
// default, as the worker does.
func TestPoolMaxConnsAtLeast(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	// Twenty jobs at once, each holding a connection while it mails, and River's own
	// connections besides: more than PoolMaxConnsDefault.
	atLeast := workers.PoolMaxConns(20)
	if atLeast <= PoolMaxConnsDefault {
		t.Fatalf("want a need (%d) above the default pool (%d)", atLeast, PoolMaxConnsDefault)
	}

	for _, tt := range []struct {
		name         string
		url          string
		wantMaxConns int32
	}{
		{"GrowsTheDefaultPool", url, atLeast},
		{"KeepsALargerPoolMaxConns", url + "&pool_max_conns=50", 50},
		{"GrowsASmallerPoolMaxConns", url + "&pool_max_conns=2", atLeast},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sized, err := OpenPool(t.Context(), &Config{DatabaseURL: tt.url, PoolMaxConnsAtLeast: atLeast}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer sized.Close()
			if got := sized.Config().MaxConns; got != tt.wantMaxConns {
				t.Fatalf("want a pool of %d connections, got %d", tt.wantMaxConns, got)
			}
			if err := sized.Ping(t.Context()); err != nil {
				t.Fatalf("want the pool usable: %v", err)
			}
		})
	}
}
