package mailer_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// holdingServer is an SMTP server that stops at one point of the conversation until the test
// releases it, so that a test knows exactly where the client is when it cancels the send:
// at the DATA command, before the handover, which smtptest's HoldNext cannot do (it holds once
// the whole message is in), or at the end of the data, as HoldNext does. It speaks just enough SMTP for
// net/smtp (no TLS, no AUTH). Like a real server, it delivers every message whose last line it
// received, whether or not the client is still there to hear that it did.
type holdingServer struct {
	addr string

	// held receives when a session reaches the hold: the DATA command with holdAtData, else
	// the end of a message's data, before the server's verdict.
	held chan struct{}
	// release, closed by the test, lets held sessions go on.
	release chan struct{}
	// ended receives when a session ends, the client having quit or gone.
	ended chan struct{}

	holdAtData bool
	delivered  atomic.Int32
}

func newHoldingServer(t *testing.T, holdAtData bool) *holdingServer {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &holdingServer{
		addr:       listener.Addr().String(),
		held:       make(chan struct{}, 10),
		release:    make(chan struct{}),
		ended:      make(chan struct{}, 10),
		holdAtData: holdAtData,
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		_ = listener.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { s.ended <- struct{}{} }()
				go func() { <-stop; _ = conn.Close() }()
				s.serve(conn, stop)
			})
		}
	})
	return s
}

func (s *holdingServer) serve(conn net.Conn, stop <-chan struct{}) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	reply := func(line string) { _, _ = io.WriteString(conn, line+"\r\n") }
	hold := func() bool {
		s.held <- struct{}{}
		select {
		case <-s.release:
			return true
		case <-stop:
			return false
		}
	}

	reply("220 holding ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			reply("250 holding")
		case "MAIL", "RCPT", "RSET", "NOOP":
			reply("250 OK")
		case "DATA":
			if s.holdAtData && !hold() {
				return
			}
			reply("354 Go ahead")
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return // cut off before the last line: no message
				}
				if line == ".\r\n" {
					break
				}
			}
			if !s.holdAtData && !hold() {
				return
			}
			s.delivered.Add(1)
			reply("250 OK: queued")
		case "QUIT":
			reply("221 Bye")
			return
		default:
			reply("502 Not implemented")
		}
	}
}

// wait fails the test unless ch receives within a few seconds.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30 s", what)
	}
}
