package bootstrap

import (
	"io"
	"log/slog"
)

// NewLogger returns the process's logger, writing to w in the configured format.
func NewLogger(w io.Writer, cfg *Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
