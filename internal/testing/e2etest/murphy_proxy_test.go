package e2etest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// murphyProxy is a TCP proxy in front of an API process that breaks the first connections it
// accepts before a single byte reaches the API, the way a flaky mobile network loses a request
// on its way out. Later connections are forwarded both ways untouched.
type murphyProxy struct {
	listener net.Listener
	target   string

	mu        sync.Mutex
	dropLeft  int
	dropped   int
	forwarded int
	conns     map[net.Conn]struct{}
	closed    bool

	wg sync.WaitGroup
}

// startMurphyProxy listens on a free loopback port, drops the first dropFirst connections and
// forwards the rest to target (host:port). It stops when the test ends.
func startMurphyProxy(t *testing.T, target string, dropFirst int) *murphyProxy {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &murphyProxy{listener: listener, target: target, dropLeft: dropFirst, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's base URL, for the client.
func (p *murphyProxy) URL() string { return "http://" + p.listener.Addr().String() }

// Counts returns how many connections were dropped and how many forwarded.
func (p *murphyProxy) Counts() (dropped, forwarded int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped, p.forwarded
}

func (p *murphyProxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		drop := p.dropLeft > 0
		if drop {
			p.dropLeft--
			p.dropped++
		} else {
			p.forwarded++
		}
		p.mu.Unlock()

		if drop {
			// A reset rather than a clean close, as a network that lost the connection gives.
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0)
			}
			_ = conn.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(conn)
	}
}

// forward pipes conn to a new connection to the target until either side closes.
func (p *murphyProxy) forward(conn net.Conn) {
	defer p.wg.Done()
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = conn.Close()
		return
	}
	if !p.track(conn, upstream) {
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // either side ending ends the connection; nothing to report
		done <- struct{}{}
	}
	go pipe(upstream, conn)
	go pipe(conn, upstream)
	<-done
	_ = conn.Close()
	_ = upstream.Close()
	<-done
	p.untrack(conn, upstream)
}

// track registers open connections so that close can end them; it refuses once closed.
func (p *murphyProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *murphyProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// close stops accepting, ends every forwarded connection and waits for their goroutines.
func (p *murphyProxy) close() {
	_ = p.listener.Close() // Accept returns and the accept loop ends
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
