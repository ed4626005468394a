package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Server timeouts. ReadHeaderTimeout stops slow-loris clients; WriteTimeout must outlast the
// longest request (a ride request waits up to its 45 s budget); ShutdownTimeout is what a
// process manager's stop grace period usually allows.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	ShutdownTimeout   = 10 * time.Second

	// abortAfter is how long in-flight requests may run on after shutdown begins before their
	// work is cancelled. The rest of ShutdownTimeout is for them to roll back, unlock their keys
	// and answer.
	abortAfter = 7 * time.Second

	// MaxHeaderBytes bounds a request's headers, in place of Go's 1 MiB. A ride request's are
	// well under 1 KiB (a bearer token, an idempotency key of at most 255 bytes); 32 KiB leaves
	// room for whatever proxies add, and a client past it gets Go's 431.
	MaxHeaderBytes = 32 << 10

	// MaxConnections caps the connections a server holds open at once; more wait in the
	// kernel's accept queue until one closes. Each costs a goroutine and buffers, so without a
	// cap a flood of idle connections costs memory without bound. Clients reach the API through
	// a load balancer or keep-alive connections of their own, so a thousand is far above need.
	MaxConnections = 1000
)

// ServeHTTP serves handler on listener, with headers and connections bounded (MaxHeaderBytes,
// MaxConnections), until ctx ends, then stops accepting connections and
// lets in-flight requests finish, within ShutdownTimeout. Requests still running after
// abortAfter are told to give up through abortInFlight (which may be nil): their work is
// atomic phases, so giving up is safe, and a retry resumes where they stopped.
func ServeHTTP(ctx context.Context, listener net.Listener, handler http.Handler, logger *slog.Logger, abortInFlight func()) error {
	return serveHTTP(ctx, netutil.LimitListener(listener, MaxConnections), handler, logger, abortInFlight)
}

func serveHTTP(ctx context.Context, listener net.Listener, handler http.Handler, logger *slog.Logger, abortInFlight func()) error {
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
	go func() { errc <- server.Serve(listener) }()

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
