// Package requestid carries the id of the HTTP request being served in its context, and adds it
// to every log line written with that context. The API puts the id there (see api/request_id.go);
// the phases, the Stripe calls and the mailer log with the request's context, so their lines
// carry it too without knowing anything of HTTP.
package requestid

import (
	"context"
	"log/slog"
)

// LogKey is the attribute a log line carries the request id under.
const LogKey = "request_id"

type contextKey struct{}

// NewContext returns ctx carrying the request id id.
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// FromContext returns the request id in ctx, or "" outside a request.
func FromContext(ctx context.Context) string {
	id, _ := ctx.Value(contextKey{}).(string)
	return id
}

// LogHandler adds the request id of the context, if any, to every record it handles, so that
// each line logged with a *Context method while serving a request names the request. Lines
// logged without a context, or outside a request, are passed on unchanged.
type LogHandler struct {
	next slog.Handler
}

// NewLogHandler wraps next. Wrapping a LogHandler again returns it as is, so that each line
// carries the id once whoever wraps the process's logger.
func NewLogHandler(next slog.Handler) slog.Handler {
	if h, ok := next.(*LogHandler); ok {
		return h
	}
	return &LogHandler{next: next}
}

// Enabled reports whether next handles level.
func (h *LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r on with the request id of ctx added.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := FromContext(ctx); id != "" {
		// A copy that shares no state with the caller's record, as slog asks of handlers that
		// add to a record.
		r = r.Clone()
		r.AddAttrs(slog.String(LogKey, id))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a LogHandler over next with attrs.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a LogHandler over next with the group name. The request id of a line
// logged through it lands inside the group; nothing in Rocket Rides logs through a group.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name)}
}
