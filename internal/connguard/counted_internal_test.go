package connguard

import (
	"net"
	"net/http"
	"testing"
)

// TestShedConnectionsStayUncounted follows a connection closed to make room through what the
// server does with it after: it closes it, or, if its answer had gone out, marks it idle. The
// guard must count it once only, and never wait on it again, or its caps drift.
func TestShedConnectionsStayUncounted(t *testing.T) {
	t.Parallel()
	pipe := func() net.Conn {
		server, client := net.Pipe()
		t.Cleanup(func() { server.Close(); client.Close() })
		return server
	}

	t.Run("ClosedByTheServerAfterBeingShed", func(t *testing.T) {
		t.Parallel()
		g := New(Limits{MaxConns: 2})
		first, second := g.admit(pipe()), g.admit(pipe())
		if g.admit(pipe()) == nil {
			t.Fatal("want a third connection admitted, the first shed")
		}
		first.Close() // the server's goroutine ends the shed connection
		if got := g.Open(); got != 2 {
			t.Fatalf("want 2 connections counted, got %d", got)
		}
		second.Close()
		if got := g.Open(); got != 1 {
			t.Fatalf("want 1 connection counted, got %d", got)
		}
	})

	t.Run("IdleAfterBeingShed", func(t *testing.T) {
		t.Parallel()
		g := New(Limits{MaxConns: 2})
		first := g.admit(pipe())
		g.admit(pipe())
		g.admit(pipe()) // sheds first
		g.connState(first, http.StateIdle)
		for range 3 {
			g.admit(pipe())
		}
		if got := g.Open(); got != 2 {
			t.Fatalf("want the cap of 2 held, got %d counted", got)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if got := g.waiting.Len(); got != 2 {
			t.Fatalf("want the 2 counted connections waiting, got %d", got)
		}
	})
}
