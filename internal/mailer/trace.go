package mailer

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the mailer's tracer, as OpenTelemetry asks: the package path.
const instrumentationName = "github.com/rocketrides/rocketrides/internal/mailer"

// Span attributes of a send. The recipient and the body are left out: an email address is
// personal data, and a trace backend is no place for it.
const (
	AttributeServerAddress = "server.address" // OpenTelemetry's semantic conventions
	AttributeServerPort    = "server.port"
	AttributeMessageID     = "rocketrides.message_id"
)

// startSpan starts the client span of one Send of m. With tracing off the global tracer is a
// no-op, whose spans record nothing.
func (s *SMTP) startSpan(ctx context.Context, m *Message) (context.Context, trace.Span) {
	return otel.Tracer(instrumentationName).Start(ctx, "smtp.send",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String(AttributeServerAddress, s.host),
			attribute.Int(AttributeServerPort, s.port),
			attribute.String(AttributeMessageID, m.MessageID)))
}
