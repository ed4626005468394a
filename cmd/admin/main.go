// Command admin does what operators need by hand: creating riders, listing the requests the
// system gave up on, and seeding history for benchmarks and demos.
//
//	admin create-user -email E (-stripe-customer-id cus_X | -card tok_visa)
//	admin list-abandoned [-limit N] [-json]
//	admin seed -rides N -riders M
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rocketrides/rocketrides/internal/bootstrap"
)

const usage = `usage: admin <command> [flags]

commands:
  create-user -email E -stripe-customer-id cus_X
  create-user -email E -card tok_visa     (creates the Stripe customer first)
  list-abandoned [-limit 100] [-json]     (requests given up on, newest first)
  seed -rides N -riders M                 (N finished rides of M new riders, for benchmarks and demos)
`

func main() {
	bootstrap.Main("admin", func(ctx context.Context) error {
		return run(ctx, os.Args[1:])
	})
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "create-user":
		return createUser(ctx, args[1:])
	case "list-abandoned":
		return listAbandoned(ctx, args[1:])
	case "seed":
		return seedHistory(ctx, args[1:])
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
