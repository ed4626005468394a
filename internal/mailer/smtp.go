package mailer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"strconv"
	"time"
)

// Timeouts of one Send. DialTimeout covers the TCP connection and, for smtps, the TLS
// handshake: a mail server that has not answered in 10 s is down, and the job is better retried
// later. SendTimeout bounds the whole conversation, so that a server that stalls mid-message
// cannot hold a worker (and its job) indefinitely; 30 s is far more than one short message needs
// and stays under River's default job timeout of a minute.
const (
	DialTimeout = 10 * time.Second
	SendTimeout = 30 * time.Second
)

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
	implicitTLS bool
	username    string
	password    string
	tlsConfig   *tls.Config
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
	s := &SMTP{url: u, host: u.Hostname()}
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
	s.addr = net.JoinHostPort(s.host, strconv.Itoa(port))
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

// Send delivers m in one SMTP transaction within SendTimeout. It returns nil once the server
// accepted the message. A cancelled ctx aborts the conversation and the returned error wraps
// ctx's error.
func (s *SMTP) Send(ctx context.Context, m *Message) error {
	env, err := m.render(time.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, SendTimeout)
	defer cancel()

	conn, err := s.dial(ctx)
	if err != nil {
		return fmt.Errorf("error connecting to SMTP server %s: %w", s.addr, err)
	}
	defer conn.Close()

	// net/smtp knows no contexts. When ctx ends (SendTimeout, or the caller's deadline or
	// cancellation), the connection's deadline moves into the past, which unblocks whatever read
	// or write is waiting; ctx.Err() is set by then, so the error says why.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if err := s.transact(conn, env); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("error sending mail via %s: %w (%w)", s.addr, ctxErr, err)
		}
		return fmt.Errorf("error sending mail via %s: %w", s.addr, err)
	}
	return nil
}

func (s *SMTP) dial(ctx context.Context) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: DialTimeout}
	if s.implicitTLS {
		tlsDialer := &tls.Dialer{NetDialer: dialer, Config: s.clientTLSConfig()}
		return tlsDialer.DialContext(ctx, "tcp", s.addr)
	}
	return dialer.DialContext(ctx, "tcp", s.addr)
}

// transact has the SMTP conversation that hands env over.
func (s *SMTP) transact(conn net.Conn, env *envelope) error {
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
	// Close ends the data with "." and reads the server's verdict on the message.
	if err := w.Close(); err != nil {
		return fmt.Errorf("error at end of data: %w", err)
	}
	// The server has accepted the message. Failing to say goodbye changes nothing about that,
	// and reporting it would only make the caller send the message again.
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
