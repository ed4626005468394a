package bootstrap

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

// TestOpenPoolKeepsConnectionsAlive reads the keepalive settings off the socket of a pool
// connection, which is what the kernel acts on: probes after keepAliveIdle of silence,
// keepAliveInterval apart, keepAliveCount of them. Without them (Go's default dialer probes
// after 15 s, 15 s apart, nine times), a LISTEN on a primary that froze would wait minutes for
// the kernel to give up.
func TestOpenPoolKeepsConnectionsAlive(t *testing.T) {
	t.Parallel()
	live, err := pgconn.ParseConfig(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	// The test database listens on a Unix socket only; keepalive is TCP's, so the pool reaches it
	// through a relay on a local TCP port.
	relay := relayToUnix(t, fmt.Sprintf("%s/.s.PGSQL.%d", live.Host, live.Port))
	url := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s sslmode=disable", relay, live.Database, live.User)
	pool, err := OpenPool(t.Context(), &Config{DatabaseURL: url}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tcp, ok := conn.Conn().PgConn().Conn().(*net.TCPConn)
	if !ok {
		t.Fatalf("want a TCP connection to the test database, got %T", conn.Conn().PgConn().Conn())
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var keepAlive, idle, interval, count int
	var sockErr error
	err = raw.Control(func(fd uintptr) {
		for _, opt := range []struct {
			level, name int
			into        *int
		}{
			{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, &keepAlive},
			{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, &idle},
			{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, &interval},
			{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, &count},
		} {
			if *opt.into, sockErr = syscall.GetsockoptInt(int(fd), opt.level, opt.name); sockErr != nil {
				return
			}
		}
	})
	if err != nil || sockErr != nil {
		t.Fatalf("error reading the socket's options: %v %v", err, sockErr)
	}
	if keepAlive == 0 || time.Duration(idle)*time.Second != keepAliveIdle ||
		time.Duration(interval)*time.Second != keepAliveInterval || count != keepAliveCount {
		t.Fatalf("want keepalive on, probes after %s, %s apart, %d of them; got on=%d, %d s, %d s, %d",
			keepAliveIdle, keepAliveInterval, keepAliveCount, keepAlive, idle, interval, count)
	}
}

// relayToUnix listens on a local TCP port, which it returns, and relays each connection to the
// Unix socket at path, until the test ends.
func relayToUnix(t *testing.T, path string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("unix", path)
			if err != nil {
				_ = in.Close()
				continue
			}
			// Either side closing ends both copies.
			wg.Go(func() { _, _ = io.Copy(out, in); _ = out.Close(); _ = in.Close() })
			wg.Go(func() { _, _ = io.Copy(in, out); _ = in.Close(); _ = out.Close() })
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}
