// Package mailer sends plain-text email: through an SMTP server when one is configured, and to
// the log otherwise, so that a developer without a mail server still sees every message.
package mailer

import (
	"context"
	"log/slog"
)

// Mailer sends one message. Send returns once the message is handed over (the SMTP server
// accepted it, or it was logged): an error means it may or may not have been delivered, and a
// caller that retries should keep the same MessageID so that the copies can be told apart.
// ctx's cancellation aborts Send only before the message has gone out; after that, Send waits
// for the outcome within a bound of its own, so that a caller shutting down does not turn a
// delivered message into an error and a second copy.
type Mailer interface {
	Send(ctx context.Context, m *Message) error

	// Delivers reports whether Send hands messages to a mail server, or only writes them to the
	// log (the Log mailer, when SMTP_URL is unset), so that a caller never reports a message
	// that nobody will receive as sent.
	Delivers() bool
}

// New returns the mailer for smtpURL (see NewSMTP), or a Log mailer writing to logger when
// smtpURL is empty: the configuration of a developer machine.
func New(smtpURL string, logger *slog.Logger, opts ...Option) (Mailer, error) {
	if smtpURL == "" {
		return NewLog(logger), nil
	}
	s, err := NewSMTP(smtpURL, opts...)
	if err != nil {
		return nil, err // not a typed nil in a non-nil Mailer
	}
	return s, nil
}
