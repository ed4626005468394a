// Package connguard keeps an HTTP server's connections from being hoarded or misread.
//
// A connection costs the server a file descriptor, a goroutine and buffers whether or not a
// request comes on it, so a client that opens connections and sends nothing, or sends headers a
// line at a time, could hold every one a server can afford. The guard caps the connections open
// at once (Limits.MaxConns) and those from one client address (Limits.MaxConnsPerAddr, proxies
// in Limits.TrustedProxies exempt), and at either cap it closes the connection that has waited
// longest (new, idle between keep-alive requests, still sending its headers, or still sending
// its body) to make room: never one whose request is in and being served. A new connection is
// refused only when every connection it would count against is being served. A request answered
// before its body came in full has its connection closed after the answer, at once, rather than
// read for the rest of a body nobody will use: net/http would otherwise wait for up to 256 KiB
// of it, until the server's read timeout, before the connection was free.
//
// It also holds requests to HTTP/1.1's strict message syntax (RFC 9112): see framer.
package connguard

import (
	"container/list"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Limits.
const (
	// MaxConnsDefault is Limits.MaxConns's default. Each connection costs the server about
	// 10 KiB (a goroutine and its buffers) and a file descriptor: 4,096 of them is 40 MiB, far
	// above what riders' keep-alive connections or a load balancer's pool need.
	MaxConnsDefault = 4096

	// MaxConnsPerAddrDefault is Limits.MaxConnsPerAddr's default: room for the riders behind
	// one carrier-grade NAT address to have a connection each in flight, well short of what one
	// machine would need to take every connection.
	MaxConnsPerAddrDefault = 100
)

// Reasons a connection was closed to make room, the values given to Limits.Shed.
const (
	ShedOldestAtCap     = "oldest_at_cap"     // a waiting connection closed at MaxConns
	ShedOldestOfAddress = "oldest_of_address" // a waiting connection closed at MaxConnsPerAddr
	ShedRefused         = "refused"           // a new connection closed: every one it counts against was serving
)

// Limits are a guard's caps.
type Limits struct {
	// MaxConns caps the connections open at once; 0 means MaxConnsDefault.
	MaxConns int

	// MaxConnsPerAddr caps the connections from one client address; 0 means
	// MaxConnsPerAddrDefault, and -1 no cap (a server only this machine's processes reach).
	MaxConnsPerAddr int

	// TrustedProxies are addresses exempt from MaxConnsPerAddr: load balancers, which carry
	// many clients' requests each.
	TrustedProxies []netip.Prefix

	// Shed, if set, is told each connection closed to make room, with its reason (ShedOldestAtCap,
	// ...). It is called without the guard's lock held.
	Shed func(reason string)
}

// Guard tracks a server's connections. Make one with New and install it with Serve's listener
// and server hooks; it is safe for concurrent use.
type Guard struct {
	limits Limits

	mu      sync.Mutex
	open    int
	waiting list.List // *conn waiting for a request, the longest-waiting first
	addrs   map[netip.Addr]*addrConns
}

// addrConns are one address's connections.
type addrConns struct {
	addr    netip.Addr
	open    int
	waiting list.List // like Guard.waiting
}

// New returns a guard with limits, defaults applied.
func New(limits Limits) *Guard {
	if limits.MaxConns == 0 {
		limits.MaxConns = MaxConnsDefault
	}
	if limits.MaxConnsPerAddr == 0 {
		limits.MaxConnsPerAddr = MaxConnsPerAddrDefault
	}
	return &Guard{limits: limits, addrs: make(map[netip.Addr]*addrConns)}
}

// Serve has server serve listener under the guard until the server is shut down, like
// server.Serve: it sets the server's ConnState and ConnContext hooks and wraps its Handler.
func (g *Guard) Serve(server *http.Server, listener net.Listener) error {
	server.ConnState = g.connState
	server.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	server.Handler = g.handler(server.Handler)
	return server.Serve(&guardedListener{Listener: listener, guard: g})
}

// Open returns how many connections are open.
func (g *Guard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

type connKey struct{}

// conn is a connection the guard counts.
type conn struct {
	net.Conn
	guard   *Guard
	addr    *addrConns // nil: not counted per address
	framing framer     // read by Read, never concurrently, and told of answers by connState

	// Guarded by guard.mu.
	counted  bool          // still counted; false once closed or chosen to make room
	sending  bool          // its request is being served, but its body is still coming
	waitElem *list.Element // in guard.waiting, while waiting for a request
	addrElem *list.Element // in addr.waiting, likewise
}

// Read reads the next bytes of requests, as the framer lets the server have them.
func (c *conn) Read(p []byte) (int, error) { return c.framing.read(c.Conn, p) }

func (c *conn) Close() error {
	c.guard.forget(c)
	return c.Conn.Close()
}

type guardedListener struct {
	net.Listener
	guard *Guard
}

// Accept returns the next connection the guard admits, closing those it refuses.
func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.guard.admit(nc); c != nil {
			return c, nil
		}
	}
}

// admit counts nc, first closing the longest-waiting connection of each cap it would pass, and
// returns it; or, if every connection of such a cap is being served, closes nc and returns nil.
func (g *Guard) admit(nc net.Conn) *conn {
	addr, perAddr := g.addressOf(nc)
	var shed []shedConn

	g.mu.Lock()
	var a *addrConns
	if perAddr {
		if a = g.addrs[addr]; a == nil {
			a = &addrConns{addr: addr}
			g.addrs[addr] = a
		}
	}
	room := true
	if a != nil && a.open >= g.limits.MaxConnsPerAddr {
		room = g.shedOldestLocked(&a.waiting, ShedOldestOfAddress, &shed)
	}
	if room && g.open >= g.limits.MaxConns {
		room = g.shedOldestLocked(&g.waiting, ShedOldestAtCap, &shed)
	}
	var c *conn
	if room {
		c = &conn{Conn: nc, guard: g, addr: a, counted: true}
		g.open++
		if a != nil {
			a.open++
		}
		g.waitLocked(c)
	} else if a != nil && a.open == 0 {
		delete(g.addrs, addr)
	}
	g.mu.Unlock()

	for _, s := range shed {
		s.conn.Conn.Close()
		g.shed(s.reason)
	}
	if c == nil {
		nc.Close()
		g.shed(ShedRefused)
	}
	return c
}

// shedConn is a connection closed to make room, and why.
type shedConn struct {
	conn   *conn
	reason string
}

// shedOldestLocked stops counting the longest-waiting connection of waiting and adds it to shed
// to be closed; it reports false if none is waiting.
func (g *Guard) shedOldestLocked(waiting *list.List, reason string, shed *[]shedConn) bool {
	front := waiting.Front()
	if front == nil {
		return false
	}
	victim := front.Value.(*conn)
	g.uncountLocked(victim)
	*shed = append(*shed, shedConn{victim, reason})
	return true
}

func (g *Guard) shed(reason string) {
	if g.limits.Shed != nil {
		g.limits.Shed(reason)
	}
}

// addressOf returns nc's client address and whether MaxConnsPerAddr applies to it.
func (g *Guard) addressOf(nc net.Conn) (netip.Addr, bool) {
	tcp, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok || g.limits.MaxConnsPerAddr < 0 {
		return netip.Addr{}, false
	}
	addr := tcp.AddrPort().Addr().Unmap()
	for _, proxy := range g.limits.TrustedProxies {
		if proxy.Contains(addr) {
			return addr, false
		}
	}
	return addr, true
}

// connState follows the server's view of each connection: one that has answered a request and
// is idle waits again, the longest-waiting last.
func (g *Guard) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || state != http.StateIdle {
		return
	}
	c.framing.answered()
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.counted && c.waitElem == nil {
		g.waitLocked(c)
	}
}

// handler marks each request's connection as served once its body is in (at once for a request
// without one) until it is idle again, and closes after the answer a connection whose framing
// could not be trusted, or whose body had not come in full.
func (g *Guard) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := r.Context().Value(connKey{}).(*conn)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if c.framing.servingLast() {
			w.Header().Set("Connection", "close")
		}
		body := &watchedBody{ReadCloser: r.Body, conn: c}
		withBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
		g.mu.Lock()
		g.unwaitLocked(c)
		if withBody && c.counted {
			// A body still coming is a wait like the headers': it may be shed, the longest
			// waiting first, which is the slowest sender, since its wait starts now.
			c.sending = true
			g.waitLocked(c)
		}
		g.mu.Unlock()
		if !withBody {
			body.done.Store(true)
		}

		r = r.WithContext(r.Context())
		r.Body = body
		next.ServeHTTP(w, r)
		if !body.done.Load() {
			// The server reads what is left of the body before it answers, unless the read
			// fails: then it answers and closes. What it holds already it reads, and keeps the
			// connection; for the rest, the read fails at once.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
}

// watchedBody is a request's body, which tells the guard when it has come in full.
type watchedBody struct {
	io.ReadCloser
	conn *conn
	done atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done.Swap(true) {
		g := b.conn.guard
		g.mu.Lock()
		b.conn.sending = false
		g.unwaitLocked(b.conn)
		g.mu.Unlock()
	}
	return n, err
}

func (g *Guard) waitLocked(c *conn) {
	c.waitElem = g.waiting.PushBack(c)
	if c.addr != nil {
		c.addrElem = c.addr.waiting.PushBack(c)
	}
}

func (g *Guard) unwaitLocked(c *conn) {
	if c.waitElem != nil {
		g.waiting.Remove(c.waitElem)
		c.waitElem = nil
	}
	if c.addrElem != nil {
		c.addr.waiting.Remove(c.addrElem)
		c.addrElem = nil
	}
}

// uncountLocked stops counting c, which is closed or about to be.
func (g *Guard) uncountLocked(c *conn) {
	if !c.counted {
		return
	}
	g.unwaitLocked(c)
	c.counted = false
	g.open--
	if c.addr != nil {
		c.addr.open--
	}
}

// forget stops counting c as it closes, and drops its address once it has no connections.
func (g *Guard) forget(c *conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.uncountLocked(c)
	if a := c.addr; a != nil && a.open == 0 && g.addrs[a.addr] == a {
		delete(g.addrs, a.addr)
	}
}
