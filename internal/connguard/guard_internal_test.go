package connguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testServer is a guarded server on loopback. /slow reads its body and is answered once release
// is closed; POST /refuse is answered 401 without its body being read; POST echoes its body;
// anything else gets 204.
type testServer struct {
	t           *testing.T
	guard       *Guard
	addr        string
	release     chan struct{}
	releaseOnce sync.Once

	mu   sync.Mutex
	shed []string
}

func startServer(t *testing.T, limits Limits) *testServer {
	t.Helper()
	s := &testServer{t: t, release: make(chan struct{})}
	limits.Shed = func(reason string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.shed = append(s.shed, reason)
	}
	s.guard = New(limits)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = listener.Addr().String()
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/slow":
			io.ReadAll(r.Body)
			<-s.release
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/refuse":
			w.WriteHeader(http.StatusUnauthorized)
		case r.Method == http.MethodPost:
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Write(body)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})}
	go s.guard.Serve(server, listener)
	t.Cleanup(func() {
		server.Close()
		s.releaseSlow()
	})
	return s
}

// releaseSlow lets GET /slow answer.
func (s *testServer) releaseSlow() { s.releaseOnce.Do(func() { close(s.release) }) }

// shedReasons returns the reasons of the connections shed so far.
func (s *testServer) shedReasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.shed)
}

// waitUntil waits until the guard's state satisfies cond.
func (s *testServer) waitUntil(what string, cond func(g *Guard) bool) {
	s.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		s.guard.mu.Lock()
		ok := cond(s.guard)
		s.guard.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// client is one connection to a test server from a source address of its own choosing.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

// dial connects from source, a loopback address (all of 127.0.0.0/8 is loopback on Linux).
func (s *testServer) dial(source string) *client {
	s.t.Helper()
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	conn, err := dialer.Dial("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return &client{t: s.t, conn: conn, r: bufio.NewReader(conn)}
}

// send writes raw bytes.
func (c *client) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, raw); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads the next response and returns its status line and body, or the error that ended
// the connection instead.
func (c *client) answer() (string, string, error) {
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.Status + closeMark(resp), string(body), err
}

func closeMark(resp *http.Response) string {
	if resp.Close {
		return " (close)"
	}
	return ""
}

// get sends GET path and wants 204.
func (c *client) get(path string) {
	c.t.Helper()
	c.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
	if status, _, err := c.answer(); err != nil || status != "204 No Content" {
		c.t.Fatalf("GET %s: want 204, got %q, %v", path, status, err)
	}
}

// closedByServer reports whether the server closed the connection without another answer.
func (c *client) closedByServer() bool {
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.r.ReadByte()
	var netErr net.Error
	return err != nil && !(errors.As(err, &netErr) && netErr.Timeout())
}

// stillOpen reports whether the connection still serves a request.
func (c *client) stillOpen() bool {
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	status, _, err := c.answer()
	return err == nil && status == "204 No Content"
}

func waiting(n int) func(g *Guard) bool { return func(g *Guard) bool { return g.waiting.Len() == n } }

func TestGuard(t *testing.T) {
	t.Parallel()

	t.Run("ClosesTheLongestWaitingAtTheCap", func(t *testing.T) {
		s := startServer(t, Limits{MaxConns: 3})
		var idle []*client
		for i := range 3 {
			c := s.dial("127.0.0.1")
			c.get("/")
			s.waitUntil("the connection is idle", waiting(i+1))
			idle = append(idle, c)
		}
		s.dial("127.0.0.1").get("/")
		if !idle[0].closedByServer() {
			t.Fatal("want the longest-idle connection closed to make room")
		}
		if !idle[1].stillOpen() || !idle[2].stillOpen() {
			t.Fatal("want the other idle connections kept")
		}
		if got := s.shedReasons(); !slices.Equal(got, []string{ShedOldestAtCap}) {
			t.Fatalf("want one connection shed at the cap, got %v", got)
		}
	})

	t.Run("ClosesAConnectionStillSendingItsHeaders", func(t *testing.T) {
		s := startServer(t, Limits{MaxConns: 2})
		slowHeaders := s.dial("127.0.0.1")
		slowHeaders.send("GET / HTTP/1.1\r\nHost: x\r\n")
		s.waitUntil("the slow connection is counted", waiting(1))
		idle := s.dial("127.0.0.1")
		idle.get("/")
		s.dial("127.0.0.1").get("/")
		if !slowHeaders.closedByServer() {
			t.Fatal("want the connection that is still sending headers, the longest waiting, closed")
		}
		if !idle.stillOpen() {
			t.Fatal("want the idle connection kept")
		}
	})

	t.Run("NeverClosesARequestBeingServed", func(t *testing.T) {
		s := startServer(t, Limits{MaxConns: 2})
		var served []*client
		for i := range 2 {
			c := s.dial("127.0.0.1")
			c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
			s.waitUntil("the request is being served", func(g *Guard) bool { return g.open == i+1 && g.waiting.Len() == 0 })
			served = append(served, c)
		}
		refused := s.dial("127.0.0.1")
		if !refused.closedByServer() {
			t.Fatal("want a connection past a cap of served ones refused")
		}
		s.releaseSlow()
		for _, c := range served {
			if status, _, err := c.answer(); err != nil || status != "204 No Content" {
				t.Fatalf("want the served requests answered, got %q, %v", status, err)
			}
		}
		if got := s.shedReasons(); !slices.Equal(got, []string{ShedRefused}) {
			t.Fatalf("want one connection refused, got %v", got)
		}
	})

	t.Run("CapsEachAddressApartFromTrustedProxies", func(t *testing.T) {
		s := startServer(t, Limits{MaxConns: 100, MaxConnsPerAddr: 2, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.4/32")}})
		// idleFrom opens a connection from source that has been answered once and is idle, the
		// newest of those waiting.
		idleFrom := func(source string) *client {
			c := s.dial(source)
			c.get("/")
			s.waitUntil("the connection is idle", func(g *Guard) bool {
				newest := g.waiting.Back()
				return newest != nil && newest.Value.(*conn).RemoteAddr().String() == c.conn.LocalAddr().String()
			})
			return c
		}
		first, second, other := idleFrom("127.0.0.2"), idleFrom("127.0.0.2"), idleFrom("127.0.0.3")
		var proxied []*client
		for range 3 {
			proxied = append(proxied, idleFrom("127.0.0.4"))
		}

		s.dial("127.0.0.2").get("/")
		if !first.closedByServer() {
			t.Fatal("want the address's longest-waiting connection closed past its cap")
		}
		if !second.stillOpen() || !other.stillOpen() {
			t.Fatal("want the address's newer connection and another address's kept")
		}
		for _, c := range proxied {
			if !c.stillOpen() {
				t.Fatal("want a trusted proxy's connections all kept past the address cap")
			}
		}
		if got := s.shedReasons(); !slices.Equal(got, []string{ShedOldestOfAddress}) {
			t.Fatalf("want one connection shed at its address's cap, got %v", got)
		}
	})

	t.Run("ForgetsClosedConnections", func(t *testing.T) {
		s := startServer(t, Limits{MaxConns: 10, MaxConnsPerAddr: 3})
		for range 20 {
			c := s.dial("127.0.0.5")
			c.get("/")
			c.conn.Close()
		}
		s.waitUntil("nothing is counted", func(g *Guard) bool {
			return g.open == 0 && g.waiting.Len() == 0 && len(g.addrs) == 0
		})
	})
}

func TestStrictFraming(t *testing.T) {
	t.Parallel()
	s := startServer(t, Limits{})

	t.Run("KeepAliveRequestsAreServed", func(t *testing.T) {
		c := s.dial("127.0.0.1")
		c.send(keepAliveRequests)
		for _, want := range []string{"bare\n \r b", "ab\nc d", ""} {
			status, body, err := c.answer()
			if err != nil || !strings.HasPrefix(status, "20") || strings.Contains(status, "close") || body != want {
				t.Fatalf("want %q answered on a kept connection, got %q %q, %v", want, status, body, err)
			}
		}
	})

	for _, tc := range []struct{ name, request string }{
		{"ObsFoldIs400", "GET / HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n"},
		{"BareLFIs400", "GET / HTTP/1.1\nHost: x\n\n"},
		{"BareCRIs400", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"},
		{"ObsFoldAfterAKeptRequestIs400", "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nX-A: one\r\n\ttwo\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.dial("127.0.0.1")
			c.send(tc.request)
			status, _, err := c.answer()
			if err == nil && status == "204 No Content" {
				status, _, err = c.answer()
			}
			if err != nil || !strings.HasPrefix(status, "400") {
				t.Fatalf("want 400, got %q, %v", status, err)
			}
			if !c.closedByServer() {
				t.Fatal("want the connection closed after the 400")
			}
		})
	}

	t.Run("HTTP10WithTransferEncodingIsAnsweredThenClosed", func(t *testing.T) {
		// Go's server ignores Transfer-Encoding in HTTP/1.0 and reads the chunked body as requests
		// (RFC 9112 §6.1: the framing is faulty).
		c := s.dial("127.0.0.1")
		c.send("POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /folded HTTP/1.1\nHost: x\nX-A: one\n two\n\n")
		status, body, err := c.answer()
		if err != nil || status != "200 OK (close)" || body != "" {
			t.Fatalf("want the POST answered, without a body, with Connection: close, got %q %q, %v", status, body, err)
		}
		if !c.closedByServer() {
			t.Fatal("want the connection closed after the one answer")
		}
	})

	t.Run("RequestsBeforeTheFaultyOneKeepTheConnection", func(t *testing.T) {
		c := s.dial("127.0.0.1")
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n" +
			"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nhi" +
			"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		for _, want := range []string{"204 No Content", "200 OK (close)"} {
			if status, _, err := c.answer(); err != nil || status != want {
				t.Fatalf("want %q, got %q, %v", want, status, err)
			}
		}
		if !c.closedByServer() {
			t.Fatal("want the connection closed after the faulty request's answer")
		}
	})

	t.Run("FaultyRequestAnsweredByTheServerItselfEndsTheConnection", func(t *testing.T) {
		// Go's server answers OPTIONS * without calling the handler, so no Connection: close.
		c := s.dial("127.0.0.1")
		c.send("OPTIONS * HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if status, _, err := c.answer(); err != nil || status != "200 OK" {
			t.Fatalf("want OPTIONS * answered, got %q, %v", status, err)
		}
		if !c.closedByServer() {
			t.Fatal("want the connection closed after the one answer")
		}
	})

	t.Run("BothFramingHeadersCloseTheConnection", func(t *testing.T) {
		c := s.dial("127.0.0.1")
		c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"3\r\nabc\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
		status, body, err := c.answer()
		if err != nil || status != "200 OK (close)" || body != "abc" {
			t.Fatalf("want the chunked body answered with Connection: close, got %q %q, %v", status, body, err)
		}
		if !c.closedByServer() {
			t.Fatal("want the connection closed, and the bytes after the body never served")
		}
	})
}
