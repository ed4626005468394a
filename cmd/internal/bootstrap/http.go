package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rocketrides/rocketrides/internal/connguard"
)

// Server timeouts. ReadHeaderTimeout bounds a new connection's wait for its request's headers,
// and IdleTimeout a keep-alive connection's wait for its next request: neither is a long time
// for a client with something to say, and each bounds what a silent one holds. WriteTimeout must
// outlast the longest request (a ride request waits up to its 45 s budget); ShutdownTimeout is
// what a process manager's stop grace period usually allows.
const (
	readHeaderTimeout = 3 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 30 * time.Second
	ShutdownTimeout   = 10 * time.Second

	// abortAfter is how long in-flight requests may run on after shutdown begins before their
	// work is cancelled. The rest of ShutdownTimeout is for them to roll back, unlock their keys
	// and answer.
	abortAfter = 7 * time.Second

	// MaxHeaderBytes bounds a request's headers, in place of Go's 1 MiB. A ride request's are
	// well under 1 KiB (a bearer token, an idempotency key of at most 255 bytes); 32 KiB leaves
	// room for whatever proxies add, and a client past it gets Go's 431.
	MaxHeaderBytes = 32 << 10
)

// ServeHTTP serves handler on listener until ctx ends, with headers bounded (MaxHeaderBytes),
// and connections bounded and requests held to strict HTTP/1.1 by guard (nil: one with
// connguard's default limits); then it stops accepting connections and lets in-flight requests
// finish, within ShutdownTimeout. Requests still running after abortAfter are told to give up
// through abortInFlight (which may be nil): their work is atomic phases, so giving up is safe,
// and a retry resumes where they stopped.
func ServeHTTP(ctx context.Context, listener net.Listener, handler http.Handler, guard *connguard.Guard, logger *slog.Logger, abortInFlight func()) error {
	if guard == nil {
		guard = connguard.New(connguard.Limits{})
	}
	server := &http.Server{
		Handler:           handler,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	errc := make(chan error, 1)
	go func() { errc <- guard.Serve(server, listener) }()

	select {
	case err := <-errc:
		return fmt.Errorf("error serving HTTP: %w", err)
	case <-ctx.Done():
	}

	logger.Info("HTTP: shutting down, draining in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if abortInFlight != nil {
		abortTimer := time.AfterFunc(abortAfter, func() {
			logger.Warn("HTTP: in-flight requests still running; aborting them")
			abortInFlight()
		})
		defer abortTimer.Stop()
	}
	if err := server.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("error shutting down HTTP server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("error serving HTTP: %w", err)
	}
	return nil
}
