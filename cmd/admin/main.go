// Command admin does what operators need by hand: creating riders and giving them new tokens, listing the requests the
// system gave up on, the rides whose charge is disputed and the background jobs that failed for
// good, putting a failed job back to work, seeding history for benchmarks and demos, and serving
// River's UI, which shows and retries River's jobs in a browser.
//
//	admin create-user -email E (-stripe-customer-id cus_X | -card tok_visa)
//	admin reissue-token -email E
//	admin list-abandoned [-limit N] [-json]
//	admin list-disputed [-limit N] [-json]
//	admin list-failed-jobs [-limit N] [-json]
//	admin retry-job river:ID | staged:ID
//	admin seed -rides N -riders M
//	admin ui
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rocketrides/rocketrides/internal/cli"
)

const usage = `usage: admin <command> [flags]

commands:
  create-user -email E -stripe-customer-id cus_X
  create-user -email E -card tok_visa     (creates the Stripe customer first)
  reissue-token -email E                  (a new API token for the rider; the old one stops working)
  list-abandoned [-limit 100] [-json]     (requests given up on, newest first)
  list-disputed [-limit 100] [-json]      (rides whose charge the rider's bank disputes, oldest first)
  list-failed-jobs [-limit 100] [-json]   (jobs failed for good, newest failure first: river:ID
                                           jobs River discarded, staged:ID jobs the enqueuer set aside)
  retry-job river:ID | staged:ID          (puts a failed job back to work, its id as listed)
  seed -rides N -riders M                 (N finished rides of M new riders, for benchmarks and demos)
  ui                                      (serves River's UI on UI_ADDR until stopped; see docs/operations.md)
`

func main() {
	cli.Main("admin", func(ctx context.Context) error {
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
	case "reissue-token":
		return reissueToken(ctx, args[1:])
	case "list-abandoned":
		return listAbandoned(ctx, args[1:])
	case "list-disputed":
		return listDisputed(ctx, args[1:])
	case "list-failed-jobs":
		return listFailedJobs(ctx, args[1:])
	case "retry-job":
		return retryJob(ctx, args[1:])
	case "seed":
		return seedHistory(ctx, args[1:])
	case "ui":
		return serveUI(ctx, args[1:])
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
