package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/requestid"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// testLogger logs JSON lines at level into a buffer that logLines decodes. The buffer is locked:
// requests write to it, and so does, after an interval, a summary's timer.
func testLogger(level slog.Level) (*slog.Logger, *proctest.SyncBuffer) {
	buf := &proctest.SyncBuffer{}
	return slog.New(requestid.NewLogHandler(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level}))), buf
}

func logLines(t *testing.T, buf *proctest.SyncBuffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("error decoding log line %q: %s", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// manualIntervals stands in for time.AfterFunc: an interval ends when the test calls end.
type manualIntervals struct {
	pending func()
}

func (m *manualIntervals) afterFunc(_ time.Duration, f func()) *time.Timer {
	if m.pending != nil {
		panic("two intervals pending at once")
	}
	m.pending = f
	return nil
}

// end ends the pending interval, and reports whether there was one.
func (m *manualIntervals) end() bool {
	f := m.pending
	m.pending = nil
	if f != nil {
		f()
	}
	return f != nil
}

func TestRejectedRequestsAreSummarized(t *testing.T) {
	t.Parallel()
	logger, buf := testLogger(slog.LevelInfo)
	s := &Server{logger: logger}
	intervals := &manualIntervals{}
	// Answers /<status> with that status.
	h := s.assignRequestID(s.logRequestsTo(newRejectedLog(logger, rejectedSummaryInterval, intervals.afterFunc),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			status, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
			w.WriteHeader(status)
		})))
	send := func(status int) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, fmt.Sprintf("/%d", status), nil))
	}

	// 10,000 rejected requests, 1,250 of each status, over ten intervals; and, among them, 100
	// other requests, which are all logged.
	rejections := []int{400, 401, 402, 404, 405, 409, 413, 429}
	const n, perInterval = 10_000, 1_000
	for i := range n {
		send(rejections[i%len(rejections)])
		if i%100 == 0 {
			send(http.StatusCreated)
		}
		if (i+1)%perInterval == 0 && !intervals.end() {
			t.Fatal("want an interval pending while rejected requests come")
		}
	}

	lines := logLines(t, buf)
	inFull := map[float64]int{}
	summarized := map[string]float64{}
	var summaries int
	for _, line := range lines {
		switch line["msg"] {
		case "API: request":
			inFull[line["status"].(float64)]++
		case "API: rejected requests":
			summaries++
			for _, status := range rejections {
				if c, ok := line[fmt.Sprintf("status_%d", status)]; ok {
					summarized[strconv.Itoa(status)] += c.(float64)
				}
			}
		default:
			t.Fatalf("unexpected line %v", line)
		}
	}
	if summaries != n/perInterval {
		t.Fatalf("want one summary per interval, %d, got %d", n/perInterval, summaries)
	}
	if got, want := len(lines), len(rejections)+n/perInterval+n/100; got != want {
		t.Fatalf("want %d lines (one per status, one per interval, and the 201s), got %d", want, got)
	}
	for _, status := range rejections {
		if inFull[float64(status)] != 1 || inFull[float64(status)]+int(summarized[strconv.Itoa(status)]) != n/len(rejections) {
			t.Fatalf("status %d: want 1 line in full and the other %d counted, got %d and %v",
				status, n/len(rejections)-1, inFull[float64(status)], summarized)
		}
	}
	if inFull[http.StatusCreated] != n/100 {
		t.Fatalf("want every 201 logged, got %d", inFull[http.StatusCreated])
	}

	t.Run("AQuietIntervalEndsTheWindow", func(t *testing.T) {
		// The last interval had nothing counted: no summary, and no interval pending after it.
		before := len(logLines(t, buf))
		if !intervals.end() || intervals.pending != nil || len(logLines(t, buf)) != before {
			t.Fatal("want a quiet interval to log nothing and close the window")
		}
		// So the next rejected request is logged in full again.
		send(http.StatusUnauthorized)
		lines := logLines(t, buf)
		if len(lines) != before+1 || lines[len(lines)-1]["status"] != 401.0 || intervals.pending == nil {
			t.Fatalf("want the first 401 of a new window logged, got %v", lines[before:])
		}
	})
}

// TestRequestLogThroughTheRouter sends floods of health checks and rejected requests through
// the real router.
func TestRequestLogThroughTheRouter(t *testing.T) {
	t.Parallel()

	t.Run("RejectedRequestsLogOneLineEach", func(t *testing.T) {
		t.Parallel()
		logger, buf := testLogger(slog.LevelInfo)
		h := NewServer(nil, nil, logger, Config{Limits: Limits{Off: true}}).Handler()
		for range 1000 {
			for _, req := range []*http.Request{
				httptest.NewRequest(http.MethodGet, "/nowhere", nil),        // 404
				httptest.NewRequest(http.MethodDelete, "/healthz", nil),     // 405
				httptest.NewRequest(http.MethodPost, "/rides", nil),         // 401
				httptest.NewRequest(http.MethodGet, "/rides/1", nil),        // 401
				httptest.NewRequest(http.MethodGet, "/nowhere/either", nil), // 404
			} {
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		}
		var lines []map[string]any
		statuses := map[float64]bool{}
		for _, line := range logLines(t, buf) {
			if line["msg"] == "API: rejected requests" {
				continue // only on a machine so slow that rejectedSummaryInterval passed
			}
			if line["msg"] != "API: request" || line["request_id"] == nil {
				t.Fatalf("unexpected line %v", line)
			}
			lines = append(lines, line)
			statuses[line["status"].(float64)] = true
		}
		if len(lines) != 3 || !statuses[401] || !statuses[404] || !statuses[405] {
			t.Fatalf("want one line for each of 401, 404 and 405, got %v", lines)
		}
	})

	// A flood of unsigned posts to the webhook, which anyone can send, is summarised like any
	// other refusal: 2,000 of them write at most 100 lines.
	t.Run("UnsignedWebhooksAreSummarized", func(t *testing.T) {
		t.Parallel()
		logger, buf := testLogger(slog.LevelInfo)
		h := NewServer(nil, nil, logger, Config{Limits: Limits{Off: true}, StripeWebhookSecret: "whsec_log_test"}).Handler()
		const posts = 2000
		refused := 0
		for range posts {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/webhooks/stripe",
				strings.NewReader(`{"id":"evt_1","object":"event","type":"charge.refunded"}`)))
			if w.Code == http.StatusBadRequest {
				refused++
			}
		}
		lines := logLines(t, buf)
		if refused != posts || len(lines) > 100 {
			t.Fatalf("want %d posts refused with at most 100 log lines, got %d refused and %d lines", posts, refused, len(lines))
		}
		if len(lines) == 0 || lines[0]["status"] != 400.0 {
			t.Fatalf("want the first refusal logged in full, got %v", lines)
		}
	})

	t.Run("HealthChecksAreLoggedAtDebugOnly", func(t *testing.T) {
		t.Parallel()
		for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
			logger, buf := testLogger(level)
			h := NewServer(nil, nil, logger, Config{Limits: Limits{Off: true}}).Handler()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
			lines := logLines(t, buf)
			if level == slog.LevelInfo && len(lines) != 0 {
				t.Fatalf("want no line at info, got %v", lines)
			}
			if level == slog.LevelDebug && (len(lines) != 1 || lines[0]["level"] != "DEBUG" || lines[0]["path"] != "/healthz") {
				t.Fatalf("want one debug line, got %v", lines)
			}
		}
	})
}
