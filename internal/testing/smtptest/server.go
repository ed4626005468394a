// Package smtptest runs an SMTP server inside a test process. It speaks the real protocol
// (EHLO/HELO, STARTTLS, AUTH PLAIN, MAIL, RCPT, DATA with dot-unstuffing, RSET, NOOP, QUIT), so
// that tests exercise the real client library, net/smtp, end to end; it keeps every message it
// accepts for the test to look at, and it can be told to refuse the next few, as a mail server
// having a bad moment does.
package smtptest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Options says what the server offers. The zero value is a plain SMTP server without TLS or
// authentication, like a local development mail catcher.
type Options struct {
	// StartTLS offers STARTTLS, with a self-signed certificate made when the server starts;
	// clients trust it through ClientTLSConfig.
	StartTLS bool

	// ImplicitTLS makes the server speak TLS from the first byte, as smtps:// expects.
	ImplicitTLS bool

	// Username and Password, when Username is set, make the server offer AUTH PLAIN and
	// require it before MAIL. With StartTLS, AUTH is offered only once TLS is on, as real
	// submission servers do.
	Username string
	Password string

	// ListenAddr is where to listen; the default, 127.0.0.1:0, is a free port on loopback.
	// The certificate names 127.0.0.1, ::1 and localhost only.
	ListenAddr string
}

// Message is one message the server accepted.
type Message struct {
	// From and To are the envelope: the addresses of MAIL FROM and RCPT TO.
	From string
	To   []string

	// Data is the message as the client sent it after DATA, dot-unstuffed, with the final
	// "." line removed.
	Data []byte

	// TLS tells whether the transaction ran over TLS (implicit or after STARTTLS).
	TLS bool

	// AuthUser is who authenticated on the connection, if anyone did.
	AuthUser string

	// Accepted is when the server accepted the message, just before it said so: the moment a
	// sender's message counts as delivered, which lab/bench -receipts measures up to.
	Accepted time.Time
}

// Server is a running SMTP server.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	opts      Options
	listener  net.Listener
	tlsConfig *tls.Config    // the server's side, nil without TLS
	roots     *x509.CertPool // what clients need to trust the server

	mu       sync.Mutex
	messages []Message
	failures []string      // replies for the next transactions' end of data
	stalls   []stall       // waits before the next transactions' end-of-data replies
	done     chan struct{} // closed by Close
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// sessionIdleTimeout closes connections whose client went quiet: a client under test that hangs
// must not keep a goroutine of the server alive past its test.
const sessionIdleTimeout = 30 * time.Second

// NewServer starts a server (on a free port of 127.0.0.1 unless Options say otherwise) and stops
// it when the test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("smtptest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Start starts a server as NewServer does, for callers without a testing.TB; they must Close it.
func Start(opts Options) (*Server, error) {
	if opts.StartTLS && opts.ImplicitTLS {
		return nil, errors.New("StartTLS and ImplicitTLS exclude each other")
	}
	s := &Server{opts: opts, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	if opts.StartTLS || opts.ImplicitTLS {
		cert, roots, err := selfSignedCertificate()
		if err != nil {
			return nil, err
		}
		s.tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.roots = roots
	}

	listenAddr := opts.ListenAddr
	if listenAddr == "" {
		listenAddr = "127.0.0.1:0"
	}
	listener, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, fmt.Errorf("error listening: %w", err)
	}
	if opts.ImplicitTLS {
		listener = tls.NewListener(listener, s.tlsConfig)
	}
	s.listener = listener
	s.Addr = listener.Addr().String()

	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// URL is the SMTP_URL that reaches this server: smtps:// with ImplicitTLS and smtp://
// otherwise, with the user and password of Options.
func (s *Server) URL() string {
	u := &url.URL{Scheme: "smtp", Host: s.Addr}
	if s.opts.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if s.opts.Username != "" {
		u.User = url.UserPassword(s.opts.Username, s.opts.Password)
	}
	return u.String()
}

// ClientTLSConfig is a client configuration that trusts this server's certificate and nothing
// else, for mailer.WithTLSConfig. It is nil for a server without TLS.
func (s *Server) ClientTLSConfig() *tls.Config {
	if s.roots == nil {
		return nil
	}
	return &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
}

// Messages returns the messages accepted so far, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	copy(out, s.messages)
	return out
}

// FailNext makes the next n transactions fail at the end of their data with reply, a whole
// SMTP reply line such as "451 4.3.0 Try again later" or "554 5.7.1 Rejected". That is the
// hardest moment for a client: it has sent the whole message and must not take it as delivered.
func (s *Server) FailNext(n int, reply string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, reply)
	}
}

// StallNext makes the next transaction wait d before the server answers the end of its data,
// as an overloaded server does: long enough, and the client gives up first. Close cuts the wait
// short.
func (s *Server) StallNext(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, stall{d: d})
}

// HoldNext makes the next transaction wait, once the server has its whole message, until the
// test releases it, and tells the test when the message has arrived. StallNext lets a clock
// decide when the server answers; a test that must act while the server holds a message (stop
// the client, say) and answer only afterwards waits on these events instead, so that a slow
// machine cannot reorder them. Close releases a hold.
func (s *Server) HoldNext() *Hold {
	h := &Hold{arrived: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, stall{hold: h})
	return h
}

// Hold is a transaction that the server holds before it answers the end of its data.
type Hold struct {
	arrived     chan struct{}
	release     chan struct{}
	releaseOnce sync.Once
}

// Arrived is closed once the server has the whole message and holds its answer.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the server answer. It may be called more than once, and before the message
// arrived, in which case the server answers at once.
func (h *Hold) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

// stall is one wait before an end-of-data reply: for d, or for a test's hold.
type stall struct {
	d    time.Duration
	hold *Hold
}

// wait waits out the stall, or until the server closes.
func (st stall) wait(done <-chan struct{}) {
	if st.hold != nil {
		close(st.hold.arrived)
		select {
		case <-st.hold.release:
		case <-done:
		}
		return
	}
	select {
	case <-time.After(st.d):
	case <-done:
	}
}

// Close stops the server, closes every open connection and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.listener.Close()
	for conn := range s.conns {
		_ = conn.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()

		go func() {
			defer s.wg.Done()
			newSession(s, conn).serve()
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
			_ = conn.Close()
		}()
	}
}

// endOfData decides the fate of a complete message, after any stall: the next queued
// failure's reply, or acceptance. It returns the reply to send.
func (s *Server) endOfData(m Message) string {
	s.mu.Lock()
	if len(s.stalls) > 0 {
		st := s.stalls[0]
		s.stalls = s.stalls[1:]
		s.mu.Unlock()
		st.wait(s.done)
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if len(s.failures) > 0 {
		reply := s.failures[0]
		s.failures = s.failures[1:]
		return reply
	}
	m.Accepted = time.Now()
	s.messages = append(s.messages, m)
	return fmt.Sprintf("250 2.0.0 OK: queued as %d", len(s.messages))
}
