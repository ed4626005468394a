package bootstrap

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/workers"
)

func TestWithMaxConns(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)

	for _, tt := range []struct {
		name         string
		url          string
		wantMaxConns int32
	}{
		// WORKER_CONCURRENCY's default of ten jobs, each holding a connection while it mails,
		// and River's own connections besides.
		{"GrowsTheDefaultPool", url, workers.PoolMaxConns(10)},
		{"KeepsALargerPoolMaxConns", url + "&pool_max_conns=50", 50},
		{"GrowsASmallerPoolMaxConns", url + "&pool_max_conns=2", workers.PoolMaxConns(10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, err := pgxpool.New(t.Context(), tt.url)
			if err != nil {
				t.Fatal(err)
			}
			sized, err := WithMaxConns(t.Context(), pool, workers.PoolMaxConns(10))
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
