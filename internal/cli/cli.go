// Package cli runs a command's main: its run function under a context that SIGINT and SIGTERM
// end, and its exit status, 2 for a wrong call and 1 for a failed run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// UsageError is a mistake in how a process was called (an unknown flag, a value out of range),
// found before it did anything, as opposed to a failure while it ran. Main exits with status 2
// for it, as the flag package does, so that a script can tell a wrong call from a failed run.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Main runs a process's run function with a context that ends on SIGINT or SIGTERM, and exits
// non-zero with the error, if any: 2 for a UsageError, 1 for anything else. Every cmd's main is
// a call to it. A run that ends because the signal cancelled what it was doing (waiting for the
// database, say) is a clean stop.
//
// The signals stay caught until the process exits, so their NotifyContext is never stopped:
// under Ctrl-C, a Procfile manager that passes the signal on (foreman, node-foreman) signals
// each process a second time, possibly after the terminal's signal has stopped it, and that
// second signal must not kill it on its way out.
func Main(name string, run func(ctx context.Context) error) {
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stopped := ctx.Err() != nil
	if err != nil && stopped && errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: stopped\n", name)
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, err)
		if _, ok := errors.AsType[*UsageError](err); ok {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
