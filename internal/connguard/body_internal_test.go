package connguard

import (
	"slices"
	"testing"
)

// TestBodies holds the guard to treating a request whose body is still coming as waiting, like
// one whose headers are: it may be shed at a cap, and it is not read on once answered.
func TestBodies(t *testing.T) {
	t.Parallel()

	// The test server has no read timeout: without the guard, the answer would wait for the body
	// for ever, and the connection with it.
	t.Run("AnsweredWithoutTheBodyAndClosed", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, Limits{})
		c := s.dial("127.0.0.1")
		c.send("POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx")
		if status, _, err := c.answer(); err != nil || status != "401 Unauthorized (close)" {
			t.Fatalf("want 401 and the connection closed, with 99 bytes of the body never sent, got %q, %v", status, err)
		}
		if !c.closedByServer() {
			t.Fatal("want the connection closed after the answer")
		}
		s.waitUntil("nothing is counted", func(g *Guard) bool { return g.open == 0 })
	})

	t.Run("AnsweredWithTheBodyInAndKept", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, Limits{})
		c := s.dial("127.0.0.1")
		c.send("POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
		if status, _, err := c.answer(); err != nil || status != "401 Unauthorized" {
			t.Fatalf("want 401 with the connection kept, got %q, %v", status, err)
		}
		if !c.stillOpen() {
			t.Fatal("want the connection kept: the body had come in full, unread")
		}
	})

	t.Run("AChunkedBodyToo", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, Limits{})
		c := s.dial("127.0.0.1")
		c.send("POST /refuse HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
		if status, _, err := c.answer(); err != nil || status != "401 Unauthorized (close)" {
			t.Fatalf("want 401 and the connection closed, got %q, %v", status, err)
		}
	})

	t.Run("ShedsTheSlowestBodySenderAtTheAddressCap", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, Limits{MaxConnsPerAddr: 3})
		first := s.dial("127.0.0.7")
		first.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\na")
		s.waitUntil("the first body sender waits", sending(1))
		second := s.dial("127.0.0.7")
		second.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nb")
		s.waitUntil("the second body sender waits", sending(2))
		served := s.dial("127.0.0.7")
		served.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nfull")
		s.waitUntil("the full request is served", func(g *Guard) bool { return g.open == 3 && g.waiting.Len() == 2 })

		s.dial("127.0.0.7").get("/")
		if !first.closedByServer() {
			t.Fatal("want the body sender that has waited longest closed to make room")
		}
		second.send("bcd")
		if status, body, err := second.answer(); err != nil || status != "200 OK" || body != "bbcd" {
			t.Fatalf("want the newer body sender kept and answered, got %q %q, %v", status, body, err)
		}
		s.releaseSlow()
		if status, _, err := served.answer(); err != nil || status != "204 No Content" {
			t.Fatalf("want the request whose body was in served, got %q, %v", status, err)
		}
		if got := s.shedReasons(); !slices.Equal(got, []string{ShedOldestOfAddress}) {
			t.Fatalf("want one connection shed at its address's cap, got %v", got)
		}
	})

	t.Run("NeverClosesARequestWhoseBodyIsIn", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, Limits{MaxConns: 1})
		served := s.dial("127.0.0.1")
		served.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nfull")
		s.waitUntil("the request is served", func(g *Guard) bool { return g.open == 1 && g.waiting.Len() == 0 })
		if !s.dial("127.0.0.1").closedByServer() {
			t.Fatal("want a connection past a cap of served ones refused")
		}
		s.releaseSlow()
		if status, _, err := served.answer(); err != nil || status != "204 No Content" {
			t.Fatalf("want the served request answered, got %q, %v", status, err)
		}
	})
}

// sending is true once n connections wait for their requests' bodies.
func sending(n int) func(g *Guard) bool {
	return func(g *Guard) bool {
		count := 0
		for e := g.waiting.Front(); e != nil; e = e.Next() {
			if e.Value.(*conn).sending {
				count++
			}
		}
		return count == n
	}
}
