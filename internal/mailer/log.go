package mailer

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// Log is the mailer of a machine without a mail server: it writes each message, rendered as it
// would be sent, to the log, where a developer reads it instead of a mailbox.
type Log struct {
	logger *slog.Logger
}

// NewLog returns a mailer writing to logger.
func NewLog(logger *slog.Logger) *Log {
	return &Log{logger: logger}
}

// String names the mailer for logs.
func (l *Log) String() string { return "log (SMTP_URL unset)" }

// Delivers is false: the message goes to the log, not to its recipient.
func (l *Log) Delivers() bool { return false }

// Send logs m at info level. It fails only on a message that SMTP would refuse too.
func (l *Log) Send(ctx context.Context, m *Message) error {
	env, err := m.render(time.Now())
	if err != nil {
		return err
	}
	l.logger.InfoContext(ctx, "Mailer: logged message instead of sending it (SMTP_URL unset)",
		slog.String("to", env.to),
		slog.String("subject", m.Subject),
		slog.String("message_id", env.messageID),
		slog.String("message", strings.ReplaceAll(string(env.data), "\r\n", "\n")))
	return nil
}
