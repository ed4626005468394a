package smtptest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Limits that keep a misbehaving client from growing the server without bound. 1000 octets is
// RFC 5321's limit on a text line, CRLF included; command lines are shorter still.
const (
	maxLineOctets    = 1000
	maxMessageOctets = 10 << 20
)

// session is one client connection.
type session struct {
	server *Server
	conn   net.Conn
	r      *bufio.Reader
	w      *bufio.Writer

	tls      bool
	greeted  bool   // EHLO or HELO was said since the connection or the last STARTTLS
	authUser string // set by a successful AUTH

	// The transaction in progress: MAIL sets from, RCPT adds to.
	inMail bool
	from   string
	to     []string
}

func newSession(server *Server, conn net.Conn) *session {
	s := &session{server: server}
	_, isTLS := conn.(*tls.Conn)
	s.setConn(conn, isTLS)
	return s
}

func (s *session) setConn(conn net.Conn, isTLS bool) {
	s.conn = conn
	s.r = bufio.NewReaderSize(conn, maxLineOctets)
	s.w = bufio.NewWriter(conn)
	s.tls = isTLS
}

// serve runs the session until QUIT, a broken connection, or an idle client.
func (s *session) serve() {
	if err := s.reply("220 smtptest ESMTP ready"); err != nil {
		return
	}
	for {
		line, err := s.readLine()
		if errors.Is(err, bufio.ErrBufferFull) {
			_ = s.reply("500 5.5.6 Line too long")
			return
		}
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		if err := s.command(strings.ToUpper(verb), strings.TrimSpace(arg)); err != nil {
			return
		}
	}
}

// errQuit ends a session after its last reply.
var errQuit = errors.New("quit")

// command handles one command line. An error ends the session.
func (s *session) command(verb, arg string) error {
	switch verb {
	case "EHLO", "HELO":
		if arg == "" {
			return s.reply("501 5.5.4 Domain required")
		}
		s.greeted = true
		s.resetTransaction()
		if verb == "HELO" {
			return s.reply("250 smtptest")
		}
		lines := []string{"smtptest greets " + arg, "8BITMIME", "SMTPUTF8", fmt.Sprintf("SIZE %d", maxMessageOctets)}
		if s.server.opts.StartTLS && !s.tls {
			lines = append(lines, "STARTTLS")
		}
		if s.authOffered() {
			lines = append(lines, "AUTH PLAIN")
		}
		return s.replyLines(250, lines...)

	case "STARTTLS":
		switch {
		case !s.server.opts.StartTLS:
			return s.reply("502 5.5.1 STARTTLS not offered")
		case s.tls:
			return s.reply("503 5.5.1 TLS already active")
		}
		if err := s.reply("220 2.0.0 Ready to start TLS"); err != nil {
			return err
		}
		tlsConn := tls.Server(s.conn, s.server.tlsConfig)
		if err := tlsConn.Handshake(); err != nil {
			return err // the client did not trust us, or gave up
		}
		// RFC 3207: everything learnt before TLS is forgotten; the client must EHLO again.
		s.setConn(tlsConn, true)
		s.greeted, s.authUser = false, ""
		s.resetTransaction()
		return nil

	case "AUTH":
		return s.auth(arg)

	case "MAIL":
		addr, ok := pathArg(arg, "FROM:")
		switch {
		case !s.greeted:
			return s.reply("503 5.5.1 Say EHLO first")
		case s.server.opts.Username != "" && s.authUser == "":
			return s.reply("530 5.7.0 Authentication required")
		case s.inMail:
			return s.reply("503 5.5.1 Nested MAIL command")
		case !ok:
			return s.reply("501 5.5.4 Syntax: MAIL FROM:<address>")
		}
		s.inMail, s.from = true, addr
		return s.reply("250 2.1.0 OK")

	case "RCPT":
		addr, ok := pathArg(arg, "TO:")
		switch {
		case !s.inMail:
			return s.reply("503 5.5.1 Need MAIL first")
		case !ok || addr == "":
			return s.reply("501 5.5.4 Syntax: RCPT TO:<address>")
		}
		s.to = append(s.to, addr)
		return s.reply("250 2.1.5 OK")

	case "DATA":
		if len(s.to) == 0 {
			return s.reply("503 5.5.1 Need RCPT first")
		}
		return s.data()

	case "RSET":
		s.resetTransaction()
		return s.reply("250 2.0.0 OK")

	case "NOOP":
		return s.reply("250 2.0.0 OK")

	case "VRFY":
		return s.reply("252 2.1.5 Cannot verify, but will accept")

	case "QUIT":
		_ = s.reply("221 2.0.0 Bye")
		return errQuit

	default:
		return s.reply("500 5.5.2 Command not recognized")
	}
}

func (s *session) authOffered() bool {
	return s.server.opts.Username != "" && (s.tls || !s.server.opts.StartTLS)
}

// auth handles AUTH PLAIN (RFC 4616), with the credentials on the command line or after a 334.
func (s *session) auth(arg string) error {
	mechanism, initial, _ := strings.Cut(arg, " ")
	switch {
	case !s.authOffered():
		return s.reply("502 5.5.1 AUTH not offered")
	case !s.greeted:
		return s.reply("503 5.5.1 Say EHLO first")
	case s.authUser != "":
		return s.reply("503 5.5.1 Already authenticated")
	case !strings.EqualFold(mechanism, "PLAIN"):
		return s.reply("504 5.5.4 Unrecognized authentication type")
	}
	if initial == "" {
		if err := s.reply("334 "); err != nil {
			return err
		}
		line, err := s.readLine()
		if err != nil {
			return err
		}
		if line == "*" {
			return s.reply("501 5.0.0 Authentication cancelled")
		}
		initial = line
	}
	decoded, err := base64.StdEncoding.DecodeString(initial)
	if err != nil {
		return s.reply("501 5.5.2 Cannot decode credentials")
	}
	parts := bytes.Split(decoded, []byte{0})
	if len(parts) != 3 || string(parts[1]) != s.server.opts.Username || string(parts[2]) != s.server.opts.Password {
		return s.reply("535 5.7.8 Authentication credentials invalid")
	}
	s.authUser = string(parts[1])
	return s.reply("235 2.7.0 Authentication successful")
}

// data reads a message after DATA up to the line ".", undoing the client's dot-stuffing
// (RFC 5321 4.5.2: a line that starts with "." was sent with one more).
func (s *session) data() error {
	if err := s.reply("354 End data with <CR><LF>.<CR><LF>"); err != nil {
		return err
	}
	var msg bytes.Buffer
	tooBig := false
	for {
		if err := s.conn.SetReadDeadline(time.Now().Add(sessionIdleTimeout)); err != nil {
			return err
		}
		line, err := s.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if err == nil && (string(line) == ".\r\n" || string(line) == ".\n") {
			break
		}
		// Only a line's start can carry a stuffed dot; ErrBufferFull hands us a long line in
		// pieces, and only the first piece follows a line break.
		if bytes.HasPrefix(line, []byte(".")) && (msg.Len() == 0 || bytes.HasSuffix(msg.Bytes(), []byte("\n"))) {
			line = line[1:]
		}
		if msg.Len()+len(line) > maxMessageOctets {
			tooBig = true
			continue
		}
		msg.Write(line)
	}

	m := Message{From: s.from, To: s.to, Data: msg.Bytes(), TLS: s.tls, AuthUser: s.authUser}
	s.resetTransaction()
	if tooBig {
		return s.reply("552 5.3.4 Message too big")
	}
	return s.reply(s.server.endOfData(m))
}

func (s *session) resetTransaction() {
	s.inMail, s.from, s.to = false, "", nil
}

// readLine reads one command line without its line ending.
func (s *session) readLine() (string, error) {
	if err := s.conn.SetReadDeadline(time.Now().Add(sessionIdleTimeout)); err != nil {
		return "", err
	}
	line, err := s.r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

func (s *session) reply(line string) error {
	if _, err := s.w.WriteString(line + "\r\n"); err != nil {
		return err
	}
	return s.w.Flush()
}

// replyLines sends a multiline reply: "250-first", ..., "250 last".
func (s *session) replyLines(code int, lines ...string) error {
	for i, line := range lines {
		sep := "-"
		if i == len(lines)-1 {
			sep = " "
		}
		if _, err := fmt.Fprintf(s.w, "%d%s%s\r\n", code, sep, line); err != nil {
			return err
		}
	}
	return s.w.Flush()
}

// pathArg parses "FROM:<address> PARAMS" (prefix "FROM:") or "TO:<address>", ignoring ESMTP
// parameters such as BODY=8BITMIME. The null path "<>" gives "".
func pathArg(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if !strings.HasPrefix(rest, "<") {
		return "", false
	}
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return "", false
	}
	return rest[1:end], true
}
