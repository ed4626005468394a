package mailer_test

import (
	"context"
	"errors"
	"mime"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

func testMessage() *mailer.Message {
	return &mailer.Message{
		From:      "Rocket Rides <receipts@rocketrides.example>",
		To:        "rider@example.com",
		Subject:   "Your receipt",
		Body:      "You were charged $20.00.\n",
		MessageID: "<ride-1.receipt@rocketrides.example>",
	}
}

// send sends testMessage to server through a mailer for url, trusting server's certificate.
func send(t *testing.T, server *smtptest.Server, url string) error {
	t.Helper()
	return sendMessage(t, server, url, testMessage())
}

func sendMessage(t *testing.T, server *smtptest.Server, url string, msg *mailer.Message) error {
	t.Helper()
	m, err := mailer.NewSMTP(url, mailer.WithTLSConfig(server.ClientTLSConfig()))
	if err != nil {
		t.Fatal(err)
	}
	return m.Send(t.Context(), msg)
}

// onlyMessage returns the one message server received, failing the test if there is not exactly one.
func onlyMessage(t *testing.T, server *smtptest.Server) smtptest.Message {
	t.Helper()
	got := server.Messages()
	if len(got) != 1 {
		t.Fatalf("want 1 message received, got %d", len(got))
	}
	return got[0]
}

// refused checks that a send failed with an error saying want, and that server got nothing.
func refused(t *testing.T, server *smtptest.Server, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want an error saying %q, got %v", want, err)
	}
	if n := len(server.Messages()); n != 0 {
		t.Fatalf("want nothing sent, got %d messages", n)
	}
}

func TestSMTP(t *testing.T) {
	t.Parallel()

	t.Run("PlainWhenServerOffersNoStartTLS", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		if err := send(t, server, server.URL()); err != nil {
			t.Fatal(err)
		}
		got := onlyMessage(t, server)
		if got.TLS || got.From != "receipts@rocketrides.example" || len(got.To) != 1 || got.To[0] != "rider@example.com" {
			t.Errorf("unexpected envelope: TLS %t, from %q, to %q", got.TLS, got.From, got.To)
		}
		msg, err := got.Parse()
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{
			"From":         `"Rocket Rides" <receipts@rocketrides.example>`,
			"To":           "<rider@example.com>",
			"Subject":      "Your receipt",
			"Message-Id":   "<ride-1.receipt@rocketrides.example>",
			"Mime-Version": "1.0",
			"Content-Type": "text/plain; charset=utf-8",
		} {
			if got := msg.Header.Get(name); got != want {
				t.Errorf("header %s: want %q, got %q", name, want, got)
			}
		}
		if date, err := msg.Header.Date(); err != nil || time.Since(date) > time.Minute {
			t.Errorf("want a current Date header, got %v (%v)", date, err)
		}
		if text, err := got.Text(); err != nil || text != "You were charged $20.00.\n" {
			t.Errorf("unexpected body %q (%v)", text, err)
		}
	})

	// Each way of reaching a server: the message must arrive over TLS exactly when the server
	// offers it, and authenticated exactly when the URL has a user.
	for _, tt := range []struct {
		name string
		opts smtptest.Options
	}{
		{"StartTLSWhenOffered", smtptest.Options{StartTLS: true}},
		{"ImplicitTLS", smtptest.Options{ImplicitTLS: true}},
		{"AuthAfterStartTLS", smtptest.Options{StartTLS: true, Username: "rocket", Password: "p@ss:word/1"}},
		{"AuthOverImplicitTLS", smtptest.Options{ImplicitTLS: true, Username: "rocket", Password: "secret"}},
		{"AuthInPlainTextToLocalhost", smtptest.Options{Username: "rocket", Password: "secret"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			server := smtptest.NewServer(t, tt.opts)
			if err := send(t, server, server.URL()); err != nil {
				t.Fatal(err)
			}
			got := onlyMessage(t, server)
			wantTLS := tt.opts.StartTLS || tt.opts.ImplicitTLS
			if got.TLS != wantTLS || got.AuthUser != tt.opts.Username {
				t.Errorf("want TLS %t and user %q, got TLS %t and user %q", wantTLS, tt.opts.Username, got.TLS, got.AuthUser)
			}
		})
	}

	t.Run("StartTLSWithUntrustedCertificateFails", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{StartTLS: true})
		m, err := mailer.NewSMTP(server.URL()) // the system's roots, which do not know the test CA
		if err != nil {
			t.Fatal(err)
		}
		// A certificate error, not a fallback to plain text.
		refused(t, server, m.Send(t.Context(), testMessage()), "certificate")
	})

	t.Run("NoPasswordInPlainTextToAnotherHost", func(t *testing.T) {
		t.Parallel()
		// 127.0.0.2 is loopback on Linux, but to net/smtp it is not localhost, so it stands in
		// for a remote server whose STARTTLS offer an attacker stripped.
		server, err := smtptest.Start(smtptest.Options{ListenAddr: "127.0.0.2:0", Username: "rocket", Password: "secret"})
		if err != nil {
			t.Skipf("cannot listen on 127.0.0.2 here: %v", err)
		}
		t.Cleanup(func() { _ = server.Close() })
		refused(t, server, send(t, server, server.URL()), "no STARTTLS")
	})

	t.Run("WrongPassword", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{StartTLS: true, Username: "rocket", Password: "secret"})
		refused(t, server, send(t, server, strings.Replace(server.URL(), "secret", "guess", 1)), "535")
	})

	t.Run("UserButServerOffersNoAuth", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		refused(t, server, send(t, server, "smtp://rocket:secret@"+server.Addr), "offers no AUTH")
	})

	t.Run("RefusedMessageIsAnError", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		server.FailNext(1, "451 4.3.0 Try again later")
		if err := send(t, server, server.URL()); err == nil || !strings.Contains(err.Error(), "451") {
			t.Fatalf("want the server's 451, got %v", err)
		}
		if err := send(t, server, server.URL()); err != nil {
			t.Fatalf("want the next try to succeed, got %v", err)
		}
		onlyMessage(t, server)
	})

	t.Run("LinesStartingWithDotsArriveIntact", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		msg := testMessage()
		msg.Body = "first\n.\n..two dots\n.hidden\nlast\n"
		if err := sendMessage(t, server, server.URL(), msg); err != nil {
			t.Fatal(err)
		}
		if text, err := onlyMessage(t, server).Text(); err != nil || text != msg.Body {
			t.Fatalf("want the body intact, got %q (%v)", text, err)
		}
	})

	t.Run("NonASCII", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		msg := testMessage()
		msg.From = "Zoë's Rides <receipts@rocketrides.example>"
		msg.Subject = "Reçu: €20.00"
		msg.Body = "Vous avez payé 20,00 €.\n" + strings.Repeat("long ", 300) + "\n"
		if err := sendMessage(t, server, server.URL(), msg); err != nil {
			t.Fatal(err)
		}
		got := onlyMessage(t, server)
		parsed, err := got.Parse()
		if err != nil {
			t.Fatal(err)
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
		if err != nil || subject != msg.Subject {
			t.Errorf("want subject %q, got %q (%v)", msg.Subject, subject, err)
		}
		from, err := parsed.Header.AddressList("From")
		if err != nil || from[0].Name != "Zoë's Rides" {
			t.Errorf("want the From name decoded, got %v (%v)", from, err)
		}
		if text, err := got.Text(); err != nil || text != msg.Body {
			t.Errorf("want the body intact, got %q (%v)", text, err)
		}
		for line := range strings.SplitSeq(string(got.Data), "\r\n") {
			if len(line) > 78 {
				t.Fatalf("want lines wrapped for the wire, got %d octets: %q", len(line), line)
			}
		}
	})

	t.Run("ServerThatNeverAnswersTimesOut", func(t *testing.T) {
		t.Parallel()
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = listener.Close() })
		go func() { // accept, then say nothing
			for {
				conn, err := listener.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { _ = conn.Close() })
			}
		}()
		m, err := mailer.NewSMTP("smtp://" + listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		// The server never answers: a send that ends at all, on the deadline's error, ended
		// because of the deadline.
		err = m.Send(ctx, testMessage())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want an error wrapping context.DeadlineExceeded, got %v", err)
		}

		// A cancelled context (a worker shutting down) must be recognisable as such too.
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := m.Send(ctx, testMessage()); !errors.Is(err, context.Canceled) {
			t.Fatalf("want an error wrapping context.Canceled, got %v", err)
		}
	})

	t.Run("ServerDown", func(t *testing.T) {
		t.Parallel()
		server := smtptest.NewServer(t, smtptest.Options{})
		url := server.URL()
		if err := server.Close(); err != nil {
			t.Fatal(err)
		}
		m, err := mailer.NewSMTP(url)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Send(t.Context(), testMessage()); err == nil || !strings.Contains(err.Error(), "error connecting") {
			t.Fatalf("want a connection error, got %v", err)
		}
	})
}

// TestSMTPCancellation cancels a send at each side of the handover, the moment the message's
// last line goes out: before it, the send is abandoned and the server has nothing; after it, the
// server has the message, and abandoning the send would only get it sent twice.
func TestSMTPCancellation(t *testing.T) {
	t.Parallel()

	// send starts sending testMessage to server with ctx, and returns where its error will go.
	send := func(t *testing.T, ctx context.Context, server *holdingServer, opts ...mailer.Option) <-chan error {
		t.Helper()
		m, err := mailer.NewSMTP("smtp://"+server.addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- m.Send(ctx, testMessage()) }()
		return errc
	}

	t.Run("BeforeTheHandoverAbandonsTheSend", func(t *testing.T) {
		t.Parallel()
		server := newHoldingServer(t, true)
		ctx, cancel := context.WithCancel(t.Context())
		errc := send(t, ctx, server)
		wait(t, server.held, "DATA")

		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("want an error wrapping context.Canceled, got %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("want the send abandoned at once")
		}
		close(server.release)
		wait(t, server.ended, "the session's end")
		if n := server.delivered.Load(); n != 0 {
			t.Fatalf("want nothing delivered, got %d messages", n)
		}
	})

	t.Run("AfterTheHandoverWaitsForTheVerdict", func(t *testing.T) {
		t.Parallel()
		server := newHoldingServer(t, false)
		ctx, cancel := context.WithCancel(t.Context())
		errc := send(t, ctx, server)
		wait(t, server.held, "the end of the data")

		cancel() // a worker shutting down
		select {
		case err := <-errc:
			t.Fatalf("want the send to wait for the server's verdict, it returned %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		close(server.release)
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("want the accepted message reported as sent, got %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("want the send to return once the server accepted")
		}
		if n := server.delivered.Load(); n != 1 {
			t.Fatalf("want 1 message delivered, got %d", n)
		}
	})

	t.Run("AfterTheHandoverSendTimeoutStillBoundsTheWait", func(t *testing.T) {
		t.Parallel()
		server := newHoldingServer(t, false) // never released
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		errc := send(t, ctx, server, mailer.WithSendTimeout(500*time.Millisecond))
		wait(t, server.held, "the end of the data")
		cancel()

		select {
		case err := <-errc:
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Fatalf("want an error wrapping context.DeadlineExceeded, not the cancellation, got %v", err)
			}
			if elapsed := time.Since(start); elapsed < 500*time.Millisecond {
				t.Fatalf("want the send to wait out its timeout, it gave up after %s", elapsed)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("want the send abandoned at its timeout")
		}
	})
}

func TestNewSMTP(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name, url string
		want      string // String() of a valid URL, or part of the error
		ok        bool
	}{
		{"SMTPDefaultPort", "smtp://mail.example.com", "smtp://mail.example.com", true},
		{"SMTPWithUserAndPort", "smtp://user:secret@mail.example.com:2525", "smtp://user:xxxxx@mail.example.com:2525", true},
		{"SMTPS", "smtps://user:secret@mail.example.com", "smtps://user:xxxxx@mail.example.com", true},
		{"IPv6", "smtp://[::1]:25", "smtp://[::1]:25", true},
		{"OtherScheme", "http://mail.example.com", "scheme must be smtp or smtps", false},
		{"NoScheme", "mail.example.com:25", "scheme must be smtp or smtps", false},
		{"NoHost", "smtp://", "has no host", false},
		{"BadPort", "smtp://mail.example.com:0", "bad port", false},
		{"Path", "smtp://mail.example.com/inbox", "want only", false},
		{"Query", "smtp://mail.example.com?tls=off", "want only", false},
		{"ErrorRedactsPassword", "smtp://user:secret@mail.example.com/x", "user:xxxxx@", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := mailer.NewSMTP(tt.url)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("want %s accepted, got %v", tt.url, err)
			case tt.ok && m.String() != tt.want:
				t.Fatalf("want String() %q, got %q", tt.want, m.String())
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("want an error containing %q, got %v", tt.want, err)
			case !tt.ok && strings.Contains(err.Error(), "secret"):
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()

	if m, err := mailer.New("", nil); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*mailer.Log); !ok {
		t.Errorf("want a Log mailer without SMTP_URL, got %T", m)
	}
	if m, err := mailer.New("smtps://mail.example.com", nil); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*mailer.SMTP); !ok {
		t.Errorf("want an SMTP mailer, got %T", m)
	}
	if m, err := mailer.New("ftp://mail.example.com", nil); err == nil || m != nil {
		t.Errorf("want an error and no mailer, got %v, %v", m, err)
	}
}
