package phases

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/models"
)

// TestCommitOutcomeUnknown breaks the connection of an atomic phase at its COMMIT, as a primary
// lost to a failover does: the request cannot know whether the phase committed. It must say so
// (ErrCommitOutcomeUnknown, which the API answers with 503 and Retry-After), and the retry with
// the same key must resume from whatever the database holds, charging once.
func TestCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		// forward sends the COMMIT on to Postgres before the break, so that it commits.
		forward bool
		// The recovery point the key must hold after the break.
		want models.RecoveryPoint
	}{
		{"CommittedUnheard", true, models.RecoveryPointRideCreated},
		{"NeverArrived", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			proxy := startCommitBreaker(t, b.Pool.Config().ConnConfig.Host, b.Pool.Config().ConnConfig.Port, tt.forward)
			pool := proxy.pool(t, b.Pool.Config().ConnString())
			executor := New(pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{LockLease: time.Hour})

			proxy.armed.Store(true)
			_, err := executor.CreateRide(ctx, newRequest(b.Rider))
			if !errors.Is(err, ErrCommitOutcomeUnknown) {
				t.Fatalf("want ErrCommitOutcomeUnknown, got %v", err)
			}
			if proxy.broken.Load() != 1 {
				t.Fatalf("want one connection broken at its COMMIT, got %d", proxy.broken.Load())
			}
			key, err := models.IdempotencyKeyGetForUpdate(ctx, b.Pool, b.Rider.ID, testKey)
			switch {
			case tt.want == "" && !errors.Is(err, models.ErrNotFound):
				t.Fatalf("want no key, as the COMMIT never arrived; got %v, %v", key, err)
			case tt.want != "" && err != nil:
				t.Fatalf("want the key the COMMIT made, got %v", err)
			case tt.want != "" && (key.RecoveryPoint != tt.want || key.LockedUntil != nil):
				// Unlocked by the fenced unlock, which matched the lock the phase committed.
				t.Fatalf("want the key unlocked at %s, got %s locked until %v", tt.want, key.RecoveryPoint, key.LockedUntil)
			}
			if n := len(b.SucceededCharges()); n != 0 {
				t.Fatalf("want no charge before the phase was known to commit, got %d", n)
			}

			// The retry resumes at once: the key is not left locked for a lease.
			outcome, err := executor.CreateRide(ctx, newRequest(b.Rider))
			requireCreated(t, outcome, err)
			b.requireOneChargedRide(t, b.Rider)
		})
	}
}

// commitBreaker is a TCP proxy in front of Postgres that, once armed, breaks the first
// connection on which the client sends COMMIT, after sending it on to Postgres (forward) or
// before.
type commitBreaker struct {
	listener net.Listener
	network  string // of Postgres: tcp, or unix for a socket directory
	target   string
	forward  bool

	armed  atomic.Bool
	broken atomic.Int32
	wg     sync.WaitGroup
}

func startCommitBreaker(t *testing.T, host string, port uint16, forward bool) *commitBreaker {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitBreaker{listener: listener, network: "tcp", target: net.JoinHostPort(host, fmt.Sprint(port)), forward: forward}
	if strings.HasPrefix(host, "/") {
		p.network, p.target = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = listener.Close()
		p.wg.Wait()
	})
	return p
}

// pool opens a pool on connString's database through the proxy, closed when the test ends.
func (p *commitBreaker) pool(t *testing.T, connString string) *pgxpool.Pool {
	t.Helper()
	u, err := url.Parse(connString)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.listener.Addr().String()
	q := u.Query()
	q.Del("host")
	q.Del("port")
	q.Set("sslmode", "disable") // the proxy reads the messages, so they must be in the clear
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func (p *commitBreaker) accept() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial(p.network, p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &brokenConn{client: client, server: server, committed: make(chan struct{})}
		p.wg.Go(func() {
			defer client.Close()
			defer server.Close()
			go c.relayServer()
			p.relayClient(c)
		})
	}
}

// brokenConn is one connection through the proxy. Once the proxy forwarded the COMMIT that
// breaks it, swallow is set: the server's answer goes to nobody, and committed closes when it
// has come.
type brokenConn struct {
	client, server net.Conn
	swallow        atomic.Bool
	committed      chan struct{}
}

// relayServer copies the server's messages to the client, each a type byte, a length and a body.
func (c *brokenConn) relayServer() {
	defer c.client.Close() // Postgres hung up (after a cancel request, say)
	header := make([]byte, 5)
	for {
		if _, err := io.ReadFull(c.server, header); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(header[1:])-4)
		if _, err := io.ReadFull(c.server, body); err != nil {
			return
		}
		if c.swallow.Load() {
			if header[0] == 'Z' { // ReadyForQuery: the COMMIT is done
				close(c.committed)
				return
			}
			continue
		}
		if _, err := c.client.Write(append(header, body...)); err != nil {
			return
		}
	}
}

// relayClient copies the client's messages to the server one by one until a COMMIT, once armed,
// breaks the connection. The startup message has no type byte; every later message has one.
func (p *commitBreaker) relayClient(c *brokenConn) {
	header := make([]byte, 4)
	if _, err := io.ReadFull(c.client, header); err != nil {
		return
	}
	startup := make([]byte, binary.BigEndian.Uint32(header)-4)
	if _, err := io.ReadFull(c.client, startup); err != nil {
		return
	}
	if _, err := c.server.Write(append(header, startup...)); err != nil {
		return
	}
	header = make([]byte, 5)
	for {
		if _, err := io.ReadFull(c.client, header); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(header[1:])-4)
		if _, err := io.ReadFull(c.client, body); err != nil {
			return
		}
		isCommit := header[0] == 'Q' && bytes.HasPrefix(bytes.ToLower(body), []byte("commit"))
		if isCommit && p.armed.CompareAndSwap(true, false) {
			p.broken.Add(1)
			if p.forward {
				// Postgres commits, and its answer goes to nobody; the client learns nothing
				// until the commit is done, so that what it does next finds it done.
				c.swallow.Store(true)
				if _, err := c.server.Write(append(header, body...)); err == nil {
					select {
					case <-c.committed:
					case <-time.After(10 * time.Second):
					}
				}
			}
			return // closes the client's connection, unanswered
		}
		if _, err := c.server.Write(append(header, body...)); err != nil {
			return
		}
	}
}
