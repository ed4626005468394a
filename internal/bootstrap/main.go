package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a process's run function with a context that ends on SIGINT or SIGTERM, and exits
// non-zero with the error, if any. Every cmd's main is a call to it. A run that ends because the
// signal cancelled what it was doing (waiting for the database, say) is a clean stop.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stopped := ctx.Err() != nil
	stop()
	if err != nil && stopped && errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: stopped\n", name)
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, err)
		os.Exit(1)
	}
}
