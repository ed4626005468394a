package mailer

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestMessageRender(t *testing.T) {
	t.Parallel()

	base := Message{
		From:    "Rocket Rides <receipts@rocketrides.example>",
		To:      "Rider <rider@example.com>",
		Subject: "Your receipt",
		Body:    "line one\nline two",
		Date:    time.Date(2024, 3, 1, 12, 30, 0, 0, time.UTC),
	}

	t.Run("Headers", func(t *testing.T) {
		t.Parallel()
		m := base
		m.MessageID = "<ride-7.receipt@rocketrides.example>"
		env, err := m.render(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := "Date: Fri, 01 Mar 2024 12:30:00 +0000\r\n" +
			"From: \"Rocket Rides\" <receipts@rocketrides.example>\r\n" +
			"To: \"Rider\" <rider@example.com>\r\n" +
			"Subject: Your receipt\r\n" +
			"Message-ID: <ride-7.receipt@rocketrides.example>\r\n" +
			"MIME-Version: 1.0\r\n" +
			"Content-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: 7bit\r\n" +
			"\r\n" +
			"line one\r\nline two\r\n"
		if string(env.data) != want {
			t.Errorf("want\n%q\ngot\n%q", want, env.data)
		}
		if env.from != "receipts@rocketrides.example" || env.to != "rider@example.com" {
			t.Errorf("unexpected envelope %q -> %q", env.from, env.to)
		}
	})

	t.Run("RandomMessageIDInSendersDomain", func(t *testing.T) {
		t.Parallel()
		m := base
		first, err := m.render(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		second, err := m.render(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^<[0-9a-f]{32}@rocketrides\.example>$`).MatchString(first.messageID) || first.messageID == second.messageID {
			t.Errorf("want distinct random IDs in the sender's domain, got %s and %s", first.messageID, second.messageID)
		}
	})

	t.Run("LongLinesQuotedPrintable", func(t *testing.T) {
		t.Parallel()
		m := base
		m.Body = strings.Repeat("x", 1200)
		env, err := m.render(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(env.data), "Content-Transfer-Encoding: quoted-printable\r\n") {
			t.Errorf("want a line over 998 octets sent quoted-printable:\n%s", env.data)
		}
	})

	for _, tt := range []struct {
		name   string
		modify func(*Message)
	}{
		{"HeaderInjectionInSubject", func(m *Message) { m.Subject = "Hi\r\nBcc: everyone@example.com" }},
		{"BadTo", func(m *Message) { m.To = "rider" }},
		{"BadFrom", func(m *Message) { m.From = "" }},
		{"MessageIDWithoutBrackets", func(m *Message) { m.MessageID = "ride-1@rocketrides.example" }},
		{"MessageIDWithoutAt", func(m *Message) { m.MessageID = "<ride-1>" }},
		{"MessageIDWithLineBreak", func(m *Message) { m.MessageID = "<a@b>\r\nBcc: x@example.com" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base
			tt.modify(&m)
			if _, err := m.render(time.Now()); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}
