package smtptest_test

import (
	"encoding/base64"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

// conversation dials server and returns a client that has read the greeting.
func conversation(t *testing.T, server *smtptest.Server) *textproto.Conn {
	t.Helper()
	c, err := textproto.Dial("tcp", server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	expect(t, c, 220)
	return c
}

// say sends a command line and checks the reply code.
func say(t *testing.T, c *textproto.Conn, line string, wantCode int) string {
	t.Helper()
	if err := c.PrintfLine("%s", line); err != nil {
		t.Fatal(err)
	}
	return expect(t, c, wantCode)
}

func expect(t *testing.T, c *textproto.Conn, wantCode int) string {
	t.Helper()
	code, msg, err := c.ReadResponse(0)
	if code != wantCode {
		t.Fatalf("want %d, got %d %s (%v)", wantCode, code, msg, err)
	}
	return msg
}

func TestServer(t *testing.T) {
	t.Parallel()

	t.Run("DotUnstuffingAndEnvelope", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		c := conversation(t, server)
		say(t, c, "EHLO client.example", 250)
		say(t, c, "MAIL FROM:<a@example.com> BODY=8BITMIME", 250)
		say(t, c, "RCPT TO:<b@example.com>", 250)
		say(t, c, "RCPT TO:<c@example.com>", 250)
		say(t, c, "DATA", 354)
		if _, err := c.W.WriteString("Subject: hi\r\n\r\n..leading dot\r\n.\r\n"); err != nil {
			t.Fatal(err)
		}
		if err := c.W.Flush(); err != nil {
			t.Fatal(err)
		}
		expect(t, c, 250)
		say(t, c, "QUIT", 221)

		got := server.Messages()
		if len(got) != 1 {
			t.Fatalf("want 1 message, got %d", len(got))
		}
		if got[0].From != "a@example.com" || len(got[0].To) != 2 || got[0].To[1] != "c@example.com" ||
			string(got[0].Data) != "Subject: hi\r\n\r\n.leading dot\r\n" {
			t.Fatalf("unexpected message %+v, data %q", got[0], got[0].Data)
		}
	})

	t.Run("CommandsOutOfSequence", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		c := conversation(t, server)
		say(t, c, "MAIL FROM:<a@example.com>", 503) // before EHLO
		say(t, c, "HELO client.example", 250)
		say(t, c, "RCPT TO:<b@example.com>", 503) // before MAIL
		say(t, c, "DATA", 503)                    // before RCPT
		say(t, c, "MAIL FROM:<a@example.com>", 250)
		say(t, c, "MAIL FROM:<a@example.com>", 503) // nested
		say(t, c, "RSET", 250)
		say(t, c, "MAIL FROM:<a@example.com>", 250) // the transaction was forgotten
		say(t, c, "NOOP", 250)
		say(t, c, "STARTTLS", 502) // not offered
		say(t, c, "AUTH PLAIN", 502)
		say(t, c, "BOGUS", 500)
		say(t, c, "QUIT", 221)
	})

	t.Run("AuthRequiredBeforeMail", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{Username: "u", Password: "p"})
		c := conversation(t, server)
		if ext := say(t, c, "EHLO client.example", 250); !contains(ext, "AUTH PLAIN") {
			t.Fatalf("want AUTH PLAIN offered, got %q", ext)
		}
		say(t, c, "MAIL FROM:<a@example.com>", 530)
		say(t, c, "AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00u\x00wrong")), 535)
		say(t, c, "AUTH PLAIN", 334) // credentials on the next line
		say(t, c, base64.StdEncoding.EncodeToString([]byte("\x00u\x00p")), 235)
		say(t, c, "MAIL FROM:<a@example.com>", 250)
	})

	t.Run("StartTLSOfferedAndAuthOnlyAfterIt", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{StartTLS: true, Username: "u", Password: "p"})
		c := conversation(t, server)
		ext := say(t, c, "EHLO client.example", 250)
		if !contains(ext, "STARTTLS") || contains(ext, "AUTH") {
			t.Fatalf("want STARTTLS offered and AUTH not before TLS, got %q", ext)
		}
		say(t, c, "AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00u\x00p")), 502)
	})

	t.Run("FailNext", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		server.FailNext(2, "554 5.7.1 Rejected")
		c := conversation(t, server)
		say(t, c, "EHLO client.example", 250)
		for _, want := range []int{554, 554, 250} {
			say(t, c, "MAIL FROM:<a@example.com>", 250)
			say(t, c, "RCPT TO:<b@example.com>", 250)
			say(t, c, "DATA", 354)
			say(t, c, "Subject: try\r\n\r\nbody\r\n.", want)
		}
		if n := len(server.Messages()); n != 1 {
			t.Fatalf("want only the third message kept, got %d", n)
		}
	})
}

func contains(lines, want string) bool {
	return slices.Contains(strings.Split(lines, "\n"), want)
}

func TestServerStallNext(t *testing.T) {
	t.Parallel()
	// Long next to a transaction on loopback (milliseconds), so that the unstalled one cannot
	// take as long even on a loaded machine; the stalled one cannot take less by construction.
	const stall = 2 * time.Second
	server := smtptest.NewServer(t, smtptest.Options{})
	server.StallNext(stall)
	c := conversation(t, server)
	say(t, c, "EHLO client.example", 250)
	for _, wantStall := range []bool{true, false} {
		say(t, c, "MAIL FROM:<a@example.com>", 250)
		say(t, c, "RCPT TO:<b@example.com>", 250)
		say(t, c, "DATA", 354)
		start := time.Now()
		say(t, c, "Subject: slow\r\n\r\nbody\r\n.", 250)
		if stalled := time.Since(start) >= stall; stalled != wantStall {
			t.Fatalf("want stalled %t, took %s", wantStall, time.Since(start))
		}
	}
}

func TestServerHoldNext(t *testing.T) {
	t.Parallel()
	server := smtptest.NewServer(t, smtptest.Options{})
	hold := server.HoldNext()
	c := conversation(t, server)
	say(t, c, "EHLO client.example", 250)
	say(t, c, "MAIL FROM:<a@example.com>", 250)
	say(t, c, "RCPT TO:<b@example.com>", 250)
	say(t, c, "DATA", 354)
	if err := c.PrintfLine("Subject: held\r\n\r\nbody\r\n."); err != nil {
		t.Fatal(err)
	}
	waitArrived(t, hold)
	if n := len(server.Messages()); n != 0 {
		t.Fatalf("want the message held, not accepted yet, got %d messages", n)
	}
	hold.Release()
	expect(t, c, 250)
	if n := len(server.Messages()); n != 1 {
		t.Fatalf("want the message accepted once released, got %d messages", n)
	}

	// The next transaction is not held; Close releases a hold nobody released.
	say(t, c, "MAIL FROM:<a@example.com>", 250)
	say(t, c, "RCPT TO:<b@example.com>", 250)
	say(t, c, "DATA", 354)
	say(t, c, "Subject: not held\r\n\r\nbody\r\n.", 250)
	forgotten := server.HoldNext()
	say(t, c, "MAIL FROM:<a@example.com>", 250)
	say(t, c, "RCPT TO:<b@example.com>", 250)
	say(t, c, "DATA", 354)
	if err := c.PrintfLine("Subject: forgotten\r\n\r\nbody\r\n."); err != nil {
		t.Fatal(err)
	}
	waitArrived(t, forgotten)
	closed := make(chan error, 1)
	go func() { closed <- server.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not release the hold within 10s")
	}
}

func waitArrived(t *testing.T, hold *smtptest.Hold) {
	t.Helper()
	select {
	case <-hold.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the held message did not arrive within 10s")
	}
}
