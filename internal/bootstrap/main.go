package bootstrap

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a process's run function with a context that ends on SIGINT or SIGTERM, and exits
// non-zero with the error, if any. Every cmd's main is a call to it.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, err)
		os.Exit(1)
	}
}
