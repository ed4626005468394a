package api

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// rejectedSummaryInterval is how often, at most, the API logs a summary of the rejected requests
// it did not log one by one (see rejectedLog). A flood of them, a scanner probing routes or a
// client retrying a revoked token in a loop, then costs a few lines a minute however large it
// is, and an operator still learns within seconds that one is going on and how big it is.
const rejectedSummaryInterval = 10 * time.Second

// logRequests logs one line per request, after it is answered, with two exceptions that keep
// the log of a busy API readable. Health and readiness checks, which a load balancer sends every
// few seconds and which say nothing new while they pass, are logged at debug level only (a
// failing /readyz logs its cause as a warning of its own). Rejected requests (every 4xx), which
// a client can send as fast as it likes, are logged in full for the first of each status and
// then counted, and rejectedLog logs the counts at a bounded rate.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return s.logRequestsTo(newRejectedLog(s.logger, rejectedSummaryInterval, time.AfterFunc), next)
}

// logRequestsTo is logRequests with the rejected requests counted in rejected.
func (s *Server) logRequestsTo(rejected *rejectedLog, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := statusWriter(w, r)
		next.ServeHTTP(ww, r)

		level := slog.LevelInfo
		switch status := ww.Status(); {
		case isHealthCheck(r):
			level = slog.LevelDebug
		case isRejection(status) && !rejected.admit(status):
			return // counted in the next summary
		}
		s.logger.LogAttrs(r.Context(), level, "API: request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", ww.Status()),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote_addr", r.RemoteAddr))
	})
}

// isHealthCheck reports whether r is a load balancer's or orchestrator's probe (see health.go).
func isHealthCheck(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
}

// isRejection reports whether status refuses the request: any 4xx, which a client can provoke
// at will and in bulk (an unsigned webhook, a malformed body, a wrong token, a route that does
// not exist, a rate limit). What a refusal did to a ride has a line of its own elsewhere (the
// Stripe call of a declined card, a refused Stripe event).
func isRejection(status int) bool {
	return status >= 400 && status < 500
}

// afterFunc is time.AfterFunc; tests replace it to end an interval when they choose.
type afterFunc func(d time.Duration, f func()) *time.Timer

// rejectedLog bounds the log lines of rejected requests. It opens a window at the first rejected
// request: the first request of each status in the window is logged in full, the others are
// only counted, and every interval a summary line gives the counts by status. The window stays
// open while rejected requests keep coming, so a flood costs one line per status plus one line
// per interval; an interval without any closes it, and the next rejected request is logged in
// full again. Counts of the last interval before the process exits are lost, which a summary
// of at most interval's worth of rejections can afford.
type rejectedLog struct {
	logger    *slog.Logger
	interval  time.Duration
	afterFunc afterFunc

	mu sync.Mutex
	// counts holds, for each status logged in full in the open window, the requests with that
	// status counted since the last summary. It is nil while no window is open.
	counts map[int]int
}

func newRejectedLog(logger *slog.Logger, interval time.Duration, afterFunc afterFunc) *rejectedLog {
	return &rejectedLog{logger: logger, interval: interval, afterFunc: afterFunc}
}

// admit reports whether a rejected request with status is to be logged in full; if not, it is
// counted for the next summary.
func (l *rejectedLog) admit(status int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = make(map[int]int)
		l.afterFunc(l.interval, l.summarize)
	}
	n, seen := l.counts[status]
	if !seen {
		l.counts[status] = 0
		return true
	}
	l.counts[status] = n + 1
	return false
}

// summarize ends an interval: it logs the counts, if any, and keeps the window open for another
// interval, or closes it after an interval with nothing counted.
func (l *rejectedLog) summarize() {
	l.mu.Lock()
	var attrs []slog.Attr
	total := 0
	for _, status := range slices.Sorted(maps.Keys(l.counts)) {
		if n := l.counts[status]; n > 0 {
			attrs = append(attrs, slog.Int(fmt.Sprintf("status_%d", status), n))
			total += n
		}
		l.counts[status] = 0
	}
	if total == 0 {
		l.counts = nil
	} else {
		l.afterFunc(l.interval, l.summarize)
	}
	l.mu.Unlock()

	if total > 0 {
		attrs = append(attrs, slog.Int("num_requests", total), slog.Duration("interval", l.interval))
		l.logger.LogAttrs(context.Background(), slog.LevelInfo, "API: rejected requests", attrs...)
	}
}
