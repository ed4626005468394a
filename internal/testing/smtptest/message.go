package smtptest

import (
	"bytes"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// Parse parses the message's headers and body, as the recipient's mail client would.
func (m Message) Parse() (*mail.Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return nil, fmt.Errorf("error parsing message: %w", err)
	}
	return msg, nil
}

// Text returns the message's body decoded from its Content-Transfer-Encoding (7bit, 8bit or
// quoted-printable), with \n line endings: the text a reader sees.
func (m Message) Text() (string, error) {
	msg, err := m.Parse()
	if err != nil {
		return "", err
	}
	body := msg.Body
	switch encoding := strings.ToLower(msg.Header.Get("Content-Transfer-Encoding")); encoding {
	case "", "7bit", "8bit":
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	default:
		return "", fmt.Errorf("unexpected Content-Transfer-Encoding %q", encoding)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("error reading body: %w", err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n"), nil
}
