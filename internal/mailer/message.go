package mailer

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"
)

// Message is a plain-text email. It is rendered as an RFC 5322 message with the headers mail
// systems expect (Date, Message-ID, MIME-Version, Content-Type), because a message without
// them is more likely to be taken for spam or to be deduplicated wrongly.
type Message struct {
	// From and To are addresses as in "Rocket Rides <receipts@rocketrides.example>" or
	// "rider@example.com". The envelope uses the same addresses.
	From string
	To   string

	Subject string

	// Body is plain text with \n line endings; it is sent as UTF-8.
	Body string

	// MessageID, as in "<ride-1.receipt@rocketrides.example>", identifies the message across
	// resends: a sender that may send a message twice (a retry after a crash) sets it so that
	// the recipient's mail system can drop the duplicate. Empty, a random one is used.
	MessageID string

	// Date is the Date header. Zero, the time of sending is used.
	Date time.Time
}

// maxMessageIDOctets keeps a Message-ID on one header line of sane length (RFC 5322 suggests
// 78 octets a line; this allows the longest ID we make with room to spare).
const maxMessageIDOctets = 250

// maxLineOctets is RFC 5322's hard limit on a line, CRLF excluded. A longer body line is sent
// quoted-printable, which wraps it.
const maxLineOctets = 998

// envelope is a message ready for the wire: the envelope addresses and the rendered message.
type envelope struct {
	from, to  string // bare addresses, for MAIL FROM and RCPT TO
	messageID string
	data      []byte // with CRLF line endings
}

// render checks m and renders it, taking now as the Date when m has none.
func (m *Message) render(now time.Time) (*envelope, error) {
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return nil, fmt.Errorf("error parsing From address %q: %w", m.From, err)
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return nil, fmt.Errorf("error parsing To address %q: %w", m.To, err)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, errors.New("subject must be one line")
	}

	messageID := m.MessageID
	if messageID == "" {
		messageID, err = randomMessageID(from.Address)
		if err != nil {
			return nil, err
		}
	} else if err := checkMessageID(messageID); err != nil {
		return nil, err
	}
	date := m.Date
	if date.IsZero() {
		date = now
	}

	body, transferEncoding, err := encodeBody(m.Body)
	if err != nil {
		return nil, err
	}

	var b bytes.Buffer
	header := func(name, value string) { fmt.Fprintf(&b, "%s: %s\r\n", name, value) }
	header("Date", date.Format(time.RFC1123Z))
	header("From", from.String())
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	header("Message-ID", messageID)
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", transferEncoding)
	b.WriteString("\r\n")
	b.Write(body)

	return &envelope{from: from.Address, to: to.Address, messageID: messageID, data: b.Bytes()}, nil
}

// encodeBody returns body with CRLF line endings, as it is when it is 7-bit text with lines
// short enough (so that the message stays readable in the log and in a raw mailbox), and
// quoted-printable otherwise.
func encodeBody(body string) ([]byte, string, error) {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}

	plain := true
	for _, line := range strings.Split(body, "\n") {
		if len(line) > maxLineOctets {
			plain = false
		}
	}
	for i := 0; i < len(body) && plain; i++ {
		if c := body[i]; c >= 0x80 || c == 0 || c == '\r' {
			plain = false
		}
	}
	if plain {
		return []byte(strings.ReplaceAll(body, "\n", "\r\n")), "7bit", nil
	}

	var b bytes.Buffer
	w := quotedprintable.NewWriter(&b) // writes CRLF for each \n, as it is text mode
	if _, err := w.Write([]byte(body)); err != nil {
		return nil, "", fmt.Errorf("error encoding body: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, "", fmt.Errorf("error encoding body: %w", err)
	}
	return b.Bytes(), "quoted-printable", nil
}

// checkMessageID accepts "<left@right>" with no spaces or line breaks: what RFC 5322's msg-id
// allows, simplified, and what keeps a header from being injected through it.
func checkMessageID(id string) error {
	inner, ok := strings.CutPrefix(id, "<")
	if ok {
		inner, ok = strings.CutSuffix(inner, ">")
	}
	left, right, found := strings.Cut(inner, "@")
	if !ok || !found || left == "" || right == "" || strings.Contains(right, "@") ||
		strings.ContainsAny(inner, " \t\r\n<>\"") || len(id) > maxMessageIDOctets {
		return fmt.Errorf("message ID %q is not of the form <left@right>", id)
	}
	return nil
}

// randomMessageID makes a Message-ID in the domain of the From address, which is a domain the
// sender controls, so that no one else's IDs collide with it.
func randomMessageID(fromAddress string) (string, error) {
	domain := fromAddress[strings.LastIndexByte(fromAddress, '@')+1:]
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("error generating message ID: %w", err)
	}
	return "<" + hex.EncodeToString(b[:]) + "@" + domain + ">", nil
}
