package bootstrap

import (
	"io"
	"log/slog"

	"github.com/rocketrides/rocketrides/internal/requestid"
)

// LogFormatDefault is the log format when LOG_FORMAT does not say: text, for a person reading a
// terminal; json is for a log collector.
const LogFormatDefault = "text"

// NewLogger returns the process's logger, writing to w in the configured format. Every line
// logged with the context of an API request carries that request's id (see internal/requestid).
func NewLogger(w io.Writer, cfg *Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(requestid.NewLogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(requestid.NewLogHandler(slog.NewTextHandler(w, opts)))
}
