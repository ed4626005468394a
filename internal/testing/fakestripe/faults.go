package fakestripe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// FaultKind names a way a charge request can go wrong, for tests of what a client does when
// Stripe or the network misbehaves.
type FaultKind string

const (
	// FaultError500 answers HTTP 500 api_error without executing the request or saving an
	// idempotent result, so a retry with the same key charges normally.
	FaultError500 FaultKind = "error_500"

	// FaultTimeout holds the request without charging until the client gives up. If instead
	// Options.TimeoutFaultHang passes or the Server is closed, the connection is dropped. The
	// idempotency key is never claimed, so a retry with it charges normally.
	FaultTimeout FaultKind = "timeout"

	// FaultChargeThenDrop processes the request normally, charge and saved idempotent result
	// included, then closes the TCP connection instead of answering: the client sees a
	// connection error although Stripe charged, and only a retry with the same key finds out.
	FaultChargeThenDrop FaultKind = "charge_then_drop"

	// FaultError500Saved answers HTTP 500 api_error from inside the endpoint, after it began
	// executing and before it charged. Real Stripe saves such a result under the idempotency
	// key and replays it, 500 and all, to every retry with that key: a client cannot retry its
	// way out of it and has to find out by other means whether the charge exists.
	FaultError500Saved FaultKind = "error_500_saved"
)

// failExecutingKey marks a request that FaultError500Saved struck, for createCharge.
type failExecutingKey struct{}

// faultKinds lists every FaultKind, for validating input naming one.
var faultKinds = []FaultKind{FaultError500, FaultTimeout, FaultChargeThenDrop, FaultError500Saved}

// InjectChargeFaults queues n faults of kind. Each POST /v1/charges request takes the first
// queued fault, so faults injected one after another strike in that order. It panics on a kind
// not listed above, which is a bug in the test.
func (s *Server) InjectChargeFaults(kind FaultKind, n int) {
	if !slices.Contains(faultKinds, kind) {
		panic(fmt.Sprintf("fakestripe: unknown fault kind %q", kind))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.pendingFaults = append(s.pendingFaults, kind)
	}
}

// InjectRefundFaults queues n faults of kind for POST /v1/refunds, as InjectChargeFaults does
// for charges: FaultChargeThenDrop makes the refund and drops the answer, FaultError500Saved
// saves a 500 under the key.
func (s *Server) InjectRefundFaults(kind FaultKind, n int) {
	if !slices.Contains(faultKinds, kind) {
		panic(fmt.Sprintf("fakestripe: unknown fault kind %q", kind))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.pendingRefundFaults = append(s.pendingRefundFaults, kind)
	}
}

// PendingFaults returns the faults still queued, the next one first.
func (s *Server) PendingFaults() []FaultKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pendingFaults)
}

// SetLatency delays every Stripe API request by d before it is handled, as a slow network or a
// slow Stripe would. Zero removes the delay.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = max(d, 0)
}

func (s *Server) currentLatency() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latency
}

// withChargeFaults counts a charge request and applies the next queued fault to it, if any.
func (s *Server) withChargeFaults(next http.Handler) http.Handler {
	return s.withFaults(s.takeChargeFault, next)
}

// withRefundFaults applies the next queued refund fault to a refund request, if any.
func (s *Server) withRefundFaults(next http.Handler) http.Handler {
	return s.withFaults(s.takeRefundFault, next)
}

// takeRefundFault takes the next queued refund fault, "" if none.
func (s *Server) takeRefundFault() FaultKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pendingRefundFaults) == 0 {
		return ""
	}
	fault := s.pendingRefundFaults[0]
	s.pendingRefundFaults = s.pendingRefundFaults[1:]
	return fault
}

// withFaults applies to a request the fault take hands out, if any.
func (s *Server) withFaults(take func() FaultKind, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault := take()
		if fault == "" {
			next.ServeHTTP(w, r)
			return
		}

		s.logger.InfoContext(r.Context(), "Fakestripe: injecting fault",
			slog.String("fault", string(fault)),
			slog.String("idempotency_key", r.Header.Get("Idempotency-Key")))

		switch fault {
		case FaultError500:
			writeResult(w, newAPIRequest(r), rejected(internalError()))
		case FaultTimeout:
			// Read the request while the server's read deadline, if any, still allows it (see
			// dropConnection), and drop the connection however the wait ends: a context can also
			// end while the client still waits, when that deadline passes.
			_, _ = io.Copy(io.Discard, r.Body) // a body that fails to read leaves nothing to drain
			s.wait(r.Context(), s.timeoutFaultHang)
			dropConnection(w, r)
		case FaultChargeThenDrop:
			next.ServeHTTP(&discardResponseWriter{header: make(http.Header)}, r)
			dropConnection(w, r)
		case FaultError500Saved:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), failExecutingKey{}, true)))
		}
	})
}

func (s *Server) takeChargeFault() FaultKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chargeRequests++
	if len(s.pendingFaults) == 0 {
		return ""
	}
	fault := s.pendingFaults[0]
	s.pendingFaults = s.pendingFaults[1:]
	return fault
}

// wait blocks for d, or less if the Server closes. It returns false if the client gave up first,
// so that there is no one left to answer.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.closed:
		return true
	case <-timer.C:
		return true
	}
}

// dropConnection closes the client's TCP connection without an answer. It first reads what is
// left of the request: closing a socket with unread bytes makes the kernel send a reset instead
// of a clean close, and the client would see "connection reset" or EOF by chance.
func dropConnection(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // a body that fails to read leaves nothing to drain
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// No hijacking (HTTP/2): aborting the handler resets the stream instead, which the
		// client sees as the same kind of failure.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close() // dropping it is the point; a failure to close changes nothing
}

// discardResponseWriter swallows the answer to a request whose connection is about to drop.
type discardResponseWriter struct{ header http.Header }

func (d *discardResponseWriter) Header() http.Header         { return d.header }
func (d *discardResponseWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardResponseWriter) WriteHeader(int)             {}
