package mailer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rocketrides/rocketrides/internal/tracing"
)

// Timeouts of one Send. DialTimeout covers the TCP connection and, for smtps, the TLS
// handshake: a mail server that has not answered in 10 s is down, and the job is better retried
// later. SendTimeout bounds the whole conversation, so that a server that stalls mid-message
// cannot hold a worker (and its job) indefinitely; 30 s is far more than one short message needs
// and stays under River's default job timeout of a minute. It is the only bound once the message
// is handed over (see Send).
const (
	DialTimeout = 10 * time.Second
	SendTimeout = 30 * time.Second
)

// quitTimeout bounds saying goodbye after the server accepted the message. Goodbye changes
// nothing about the message, and every moment spent on it is one more in which the caller could
// die before recording that the message went out.
const quitTimeout = time.Second

// Default ports when the URL gives none: submission with STARTTLS (RFC 6409) for smtp://, and
// submission over implicit TLS (RFC 8314) for smtps://.
const (
	defaultSMTPPort  = 587
	defaultSMTPSPort = 465
)

// SMTP sends messages through an SMTP server, one connection per message: receipts are few,
// and a fresh connection has no idle state to go stale between them.
type SMTP struct {
	url         *url.URL
	host        string // what the server's certificate must name; also net/smtp's host for AUTH
	addr        string // host:port
	port        int
	implicitTLS bool
	username    string
	password    string
	tlsConfig   *tls.Config
	sendTimeout time.Duration
}

// Option configures an SMTP mailer.
type Option func(*SMTP)

// WithTLSConfig sets the TLS configuration used for STARTTLS and smtps. Tests use it to trust
// the certificate of their own server through RootCAs. ServerName is filled in from the URL when
// empty. Without this option the system's roots are trusted, and certificates are always
// verified.
func WithTLSConfig(config *tls.Config) Option {
	return func(s *SMTP) { s.tlsConfig = config }
}

// WithSendTimeout replaces SendTimeout as the bound of one Send. Tests use it to see the bound
// hold without waiting half a minute.
func WithSendTimeout(d time.Duration) Option {
	return func(s *SMTP) { s.sendTimeout = d }
}

// NewSMTP returns a mailer for rawURL:
//
//   - smtp://[user:pass@]host[:port] (port 587 by default) upgrades the connection with
//     STARTTLS when the server offers it and speaks plain SMTP when it does not. A server that
//     offers STARTTLS must present a valid certificate: a failed upgrade is an error, never a
//     fallback to plain text.
//   - smtps://[user:pass@]host[:port] (port 465 by default) speaks TLS from the first byte.
//
// With a user, the mailer authenticates with AUTH PLAIN. It sends the password only over TLS,
// or in plain text to localhost (net/smtp's rule), so that a man in the middle who strips the
// server's STARTTLS offer learns no password: the send fails instead. Special characters in the
// user or password must be percent-encoded, as in any URL.
func NewSMTP(rawURL string, opts ...Option) (*SMTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing SMTP URL: %w", err)
	}
	s := &SMTP{url: u, host: u.Hostname(), sendTimeout: SendTimeout}
	var port int
	switch u.Scheme {
	case "smtp":
		port = defaultSMTPPort
	case "smtps":
		port, s.implicitTLS = defaultSMTPSPort, true
	default:
		return nil, fmt.Errorf("SMTP URL %s: scheme must be smtp or smtps, not %q", u.Redacted(), u.Scheme)
	}
	if s.host == "" {
		return nil, fmt.Errorf("SMTP URL %s has no host", u.Redacted())
	}
	if p := u.Port(); p != "" {
		port, err = strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("SMTP URL %s: bad port %q", u.Redacted(), p)
		}
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("SMTP URL %s: want only scheme, user, password, host and port", u.Redacted())
	}
	s.addr, s.port = net.JoinHostPort(s.host, strconv.Itoa(port)), port
	if u.User != nil {
		s.username = u.User.Username()
		s.password, _ = u.User.Password()
	}
	for _, opt := range opts {
		opt(s)
	}
	return s, nil
}

// String is the URL with its password masked, for logs.
func (s *SMTP) String() string { return s.url.Redacted() }

// Delivers is true: Send hands each message to the mail server.
func (s *SMTP) Delivers() bool { return true }

// Send delivers m in one SMTP transaction within SendTimeout. It returns nil once the server
// accepted the message.
//
// ctx can abort the conversation only until the message is handed over, that is until the last
// line of its data (the lone ".") is sent. From then on the server has the message and will
// deliver it if it accepts it; giving up on its reply because the caller was cancelled (a worker
// shutting down) would only make the caller's retry send a second copy. Send then waits for the
// reply, bounded by SendTimeout alone. An error caused by ctx wraps ctx's error, and one caused
// by SendTimeout wraps context.DeadlineExceeded.
//
// Each Send is a client span of the trace in ctx, if any, with its error: a job retried by River
// shows one span per attempt.
func (s *SMTP) Send(ctx context.Context, m *Message) (err error) {
	ctx, span := s.startSpan(ctx, m)
	defer func() { tracing.End(span, err) }()
	return s.send(ctx, m)
}

func (s *SMTP) send(ctx context.Context, m *Message) error {
	env, err := m.render(time.Now())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.sendTimeout)
	dialCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	conn, err := s.dial(dialCtx)
	if err != nil {
		return fmt.Errorf("error connecting to SMTP server %s: %w", s.addr, err)
	}
	defer conn.Close()

	// net/smtp knows no contexts. The connection's deadline is SendTimeout's; ctx ending before
	// the handover moves it into the past, which unblocks whatever read or write is waiting.
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("error sending mail via %s: %w", s.addr, err)
	}
	h := &handover{conn: conn, deadline: deadline}
	stop := context.AfterFunc(ctx, h.cancel)
	defer stop()

	if err := s.transact(conn, env, h); err != nil {
		switch {
		case h.wasCancelled():
			return fmt.Errorf("error sending mail via %s: %w (%w)", s.addr, ctx.Err(), err)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("error sending mail via %s: no answer within %s: %w (%w)", s.addr, s.sendTimeout, context.DeadlineExceeded, err)
		}
		return fmt.Errorf("error sending mail via %s: %w", s.addr, err)
	}
	return nil
}

// handover is where a message becomes the server's. Before it, the caller's cancellation aborts
// the conversation; after it, nothing but the connection's deadline does.
type handover struct {
	conn     net.Conn
	deadline time.Time // the connection's, SendTimeout after Send began

	mu         sync.Mutex
	handedOver bool
	cancelled  bool
}

// errCancelledBeforeHandover ends a conversation whose caller was cancelled before the message's
// last line went out.
var errCancelledBeforeHandover = errors.New("cancelled before the message was handed over")

// cancel aborts the conversation, unless the message has been handed over.
func (h *handover) cancel() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.handedOver {
		return
	}
	h.cancelled = true
	_ = h.conn.SetDeadline(time.Unix(1, 0)) // long past: every read or write, waiting or to come, fails
}

// handOver marks the message as handed over, unless the caller was cancelled first; then it
// returns errCancelledBeforeHandover, and the message must not be finished.
func (h *handover) handOver() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancelled {
		return errCancelledBeforeHandover
	}
	h.handedOver = true
	return nil
}

func (h *handover) wasCancelled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancelled
}

func (s *SMTP) dial(ctx context.Context) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: DialTimeout}
	if s.implicitTLS {
		tlsDialer := &tls.Dialer{NetDialer: dialer, Config: s.clientTLSConfig()}
		return tlsDialer.DialContext(ctx, "tcp", s.addr)
	}
	return dialer.DialContext(ctx, "tcp", s.addr)
}

// transact has the SMTP conversation that hands env over, marking h just before the message's
// last line goes out.
func (s *SMTP) transact(conn net.Conn, env *envelope, h *handover) error {
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fmt.Errorf("error reading greeting: %w", err)
	}
	defer c.Close()

	tlsActive := s.implicitTLS
	if !s.implicitTLS {
		if offered, _ := c.Extension("STARTTLS"); offered {
			if err := c.StartTLS(s.clientTLSConfig()); err != nil {
				return fmt.Errorf("error starting TLS: %w", err)
			}
			tlsActive = true
		}
	}

	if s.username != "" {
		if offered, _ := c.Extension("AUTH"); !offered {
			return errors.New("the SMTP URL has a user, but the server offers no AUTH")
		}
		if !tlsActive && !isLocalhost(s.host) {
			return errors.New("the server offers no STARTTLS, and the password is not sent in plain text to a host other than localhost")
		}
		if err := c.Auth(smtp.PlainAuth("", s.username, s.password, s.host)); err != nil {
			return fmt.Errorf("error authenticating as %q: %w", s.username, err)
		}
	}

	if err := c.Mail(env.from); err != nil {
		return fmt.Errorf("error at MAIL FROM: %w", err)
	}
	if err := c.Rcpt(env.to); err != nil {
		return fmt.Errorf("error at RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("error at DATA: %w", err)
	}
	if _, err := w.Write(env.data); err != nil {
		return fmt.Errorf("error writing message: %w", err)
	}
	// Without its last line, a message is no message: cut off here, the server drops it.
	if err := h.handOver(); err != nil {
		return err
	}
	// Close ends the data with "." and reads the server's verdict on the message.
	if err := w.Close(); err != nil {
		return fmt.Errorf("error at end of data: %w", err)
	}
	// The server has accepted the message. Failing to say goodbye changes nothing about that,
	// and reporting it would only make the caller send the message again.
	if quitDeadline := time.Now().Add(quitTimeout); quitDeadline.Before(h.deadline) {
		_ = conn.SetDeadline(quitDeadline)
	}
	_ = c.Quit()
	return nil
}

func (s *SMTP) clientTLSConfig() *tls.Config {
	var config *tls.Config
	if s.tlsConfig != nil {
		config = s.tlsConfig.Clone()
	} else {
		config = &tls.Config{}
	}
	if config.ServerName == "" {
		config.ServerName = s.host
	}
	if config.MinVersion == 0 {
		config.MinVersion = tls.VersionTLS12
	}
	return config
}

// isLocalhost is net/smtp's own test for where PlainAuth may send a password unencrypted,
// repeated here to fail with a clearer message than its "unencrypted connection".
func isLocalhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
