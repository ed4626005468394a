package requestid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/requestid"
)

func TestLogHandler(t *testing.T) {
	t.Parallel()

	// logLines logs through a LogHandler over a JSON handler and returns the lines decoded.
	logLines := func(t *testing.T, log func(logger *slog.Logger)) []map[string]any {
		t.Helper()
		var buf bytes.Buffer
		log(slog.New(requestid.NewLogHandler(slog.NewJSONHandler(&buf, nil))))
		var lines []map[string]any
		for line := range strings.Lines(buf.String()) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("error decoding %q: %s", line, err)
			}
			lines = append(lines, m)
		}
		return lines
	}

	t.Run("AddsTheIDOfTheContext", func(t *testing.T) {
		t.Parallel()
		ctx := requestid.NewContext(context.Background(), "req_1")
		lines := logLines(t, func(logger *slog.Logger) {
			logger.With(slog.String("component", "x")).InfoContext(ctx, "Test: one", slog.Int("n", 1))
		})
		if len(lines) != 1 || lines[0]["request_id"] != "req_1" || lines[0]["component"] != "x" || lines[0]["n"] != 1.0 {
			t.Fatalf("want the request id beside the line's own attributes, got %v", lines)
		}
	})

	t.Run("LeavesLinesOutsideARequestAlone", func(t *testing.T) {
		t.Parallel()
		lines := logLines(t, func(logger *slog.Logger) {
			logger.InfoContext(context.Background(), "Test: no request")
			logger.Info("Test: no context")
		})
		for _, line := range lines {
			if _, ok := line["request_id"]; ok {
				t.Fatalf("want no request id outside a request, got %v", line)
			}
		}
		if len(lines) != 2 {
			t.Fatalf("want 2 lines, got %d", len(lines))
		}
	})

	t.Run("WrappingTwiceAddsTheIDOnce", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		logger := slog.New(requestid.NewLogHandler(requestid.NewLogHandler(slog.NewTextHandler(&buf, nil))))
		logger.InfoContext(requestid.NewContext(context.Background(), "req_2"), "Test: twice")
		if n := strings.Count(buf.String(), "request_id=req_2"); n != 1 {
			t.Fatalf("want the id once, got %d times: %s", n, buf.String())
		}
	})

	t.Run("FromContextOutsideARequestIsEmpty", func(t *testing.T) {
		t.Parallel()
		if id := requestid.FromContext(context.Background()); id != "" {
			t.Fatalf("want no id, got %q", id)
		}
	})
}
