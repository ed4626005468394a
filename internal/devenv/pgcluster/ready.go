package pgcluster

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// readyPollInterval is how often waitReady tries to connect: a start takes about a second, so
// polling more slowly would add noticeably to every test binary.
const readyPollInterval = 20 * time.Millisecond

// waitReady returns once the server accepts connections to the postgres database, or an error
// when it exits first or does not within the start timeout. Connecting, rather than watching for
// the socket, also waits out "the database system is starting up".
func (c *Cluster) waitReady(ctx context.Context, srv *server) error {
	ctx, cancel := context.WithTimeout(ctx, c.startTimeout)
	defer cancel()

	var lastErr error
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err

		select {
		case <-srv.exited:
			return fmt.Errorf("postgres exited: %w", srv.err)
		case <-ctx.Done():
			return fmt.Errorf("postgres accepts no connections after %s: %w", c.startTimeout, lastErr)
		case <-time.After(readyPollInterval):
		}
	}
}
