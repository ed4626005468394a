package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rocketrides/rocketrides/internal/cli"
)

func main() {
	cli.Main("chaos", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout)
	})
}

// config is what the flags say.
type config struct {
	duration        time.Duration
	clients         int
	seed            uint64
	apis            int
	workers         int
	crashProb       float64
	dbRestarts      int
	ha              bool
	haDefaultTiming bool
	strictReceipts  bool
	maxDuplicates   int
	logPath         string
	summaryJSON     string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	flags := flag.NewFlagSet("chaos", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.DurationVar(&cfg.duration, "duration", 45*time.Second, "how long clients book rides while faults fire")
	flags.IntVar(&cfg.clients, "clients", 8, "concurrent clients")
	flags.Uint64Var(&cfg.seed, "seed", 0, "seed of the fault schedule and of the clients' choices; 0 picks one (printed)")
	flags.IntVar(&cfg.apis, "apis", 2, "API replicas")
	flags.IntVar(&cfg.workers, "workers", 2, "receipt workers")
	flags.Float64Var(&cfg.crashProb, "crash-prob", 0.01, "probability that an API crashes (or stalls) at each fault point of a request")
	flags.IntVar(&cfg.dbRestarts, "db-restarts", 0, "database restarts during the soak; 0 means one per 12 s of -duration, at least one")
	flags.BoolVar(&cfg.ha, "ha", false, "run the database as a pg_auto_failover formation, a primary and its synchronous standby, "+
		"and make each database fault a failover: the primary's machine lost (SIGKILL) and frozen (SIGSTOP) in turn")
	flags.BoolVar(&cfg.haDefaultTiming, "ha-default-timing", false, "with -ha: keep pg_auto_failover's own failover timing (about 50 s) rather than the tuned one (hacluster.TunedSettings)")
	flags.BoolVar(&cfg.strictReceipts, "strict-receipts", false, "count a receipt mailed twice (same Message-ID) as a violation")
	flags.IntVar(&cfg.maxDuplicates, "max-duplicate-receipts", -1, "fail if more copies of receipts than this were mailed (a receipt mailed twice is one copy); "+
		"default the receipt contract's bound: 1, plus each worker's concurrency for each database outage longer than the worker's record timeout")
	flags.StringVar(&cfg.logPath, "log", "", "file for the processes' output; default a new file in the temporary directory")
	flags.StringVar(&cfg.summaryJSON, "summary-json", "", "also write the summary as JSON to this file")
	if err := flags.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case cfg.duration < 5*time.Second:
		return nil, errors.New("-duration must be at least 5s")
	case cfg.clients < 1 || cfg.apis < 1 || cfg.workers < 1:
		return nil, errors.New("-clients, -apis and -workers must be at least 1")
	case cfg.crashProb < 0 || cfg.crashProb > 1:
		return nil, errors.New("-crash-prob must be in [0, 1]")
	case cfg.maxDuplicates < -1:
		return nil, errors.New("-max-duplicate-receipts must not be negative")
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if cfg.dbRestarts == 0 {
		cfg.dbRestarts = max(1, int(cfg.duration/(12*time.Second)))
	}
	return cfg, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	started := time.Now()
	logFile, err := openLog(cfg.logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	events := newEventLog(logFile)
	progress := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Fprintf(stdout, "chaos %6.1fs  %s\n", time.Since(started).Seconds(), line)
		events.note(line)
	}
	progress("seed %d, %s with %d clients; processes' output in %s", cfg.seed, cfg.duration, cfg.clients, logFile.Name())

	sum := &summary{Seed: cfg.seed, Duration: cfg.duration.String(), Clients: cfg.clients, LogFile: logFile.Name()}
	err = soakAndCheck(ctx, cfg, events, progress, sum)
	sum.Timings.Total = seconds(time.Since(started))
	sum.addEvents(events)
	if sum.Timings.Soak > 0 { // the stack came up: there is something to summarise
		sum.print(stdout)
	}
	if cfg.summaryJSON != "" {
		if werr := sum.writeJSON(cfg.summaryJSON); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err != nil && ctx.Err() != nil {
		// Not wrapped: cli.Main takes a cancelled run for a clean stop and exits 0, but
		// an interrupted soak proved nothing, and a CI job must not pass on it.
		return fmt.Errorf("interrupted before the invariants were checked: %v", err)
	}
	if err != nil {
		return err
	}
	if len(sum.Violations)+len(sum.Failures) > 0 {
		return fmt.Errorf("%d invariant violations and %d other failures (see above; processes' output in %s)",
			len(sum.Violations), len(sum.Failures), logFile.Name())
	}
	return nil
}

// soakAndCheck brings the stack up, runs the soak, settles and checks. An error means the soak
// could not run to its end; what it found is in sum.
func soakAndCheck(ctx context.Context, cfg *config, events *eventLog, progress func(string, ...any), sum *summary) (err error) {
	t0 := time.Now()
	progress("building the commands and starting the stack")
	st, err := startStack(ctx, cfg, events, progress)
	if err != nil {
		return fmt.Errorf("error bringing the stack up: %w", err)
	}
	defer func() {
		err = errors.Join(err, st.close())
		sum.addRaces(st.sup.RaceReports()) // all there, now that every process has exited
	}()
	sum.Timings.BringUp = seconds(time.Since(t0))

	s := newSoak(cfg, st, events, progress)
	defer sum.addSoak(s) // whatever happened, count what the soak did
	t1 := time.Now()
	err = s.run(ctx)
	sum.Timings.Soak = seconds(time.Since(t1))
	if err != nil {
		return err
	}

	t2 := time.Now()
	err = s.settle(ctx)
	sum.Timings.Settle = seconds(time.Since(t2))
	if err != nil {
		return err
	}

	t3 := time.Now()
	report, err := s.check(ctx)
	sum.Timings.Check = seconds(time.Since(t3))
	if err != nil {
		return err
	}
	sum.addReport(report)
	return nil
}

// openLog creates the file the processes' output goes to.
func openLog(path string) (*os.File, error) {
	if path == "" {
		f, err := os.CreateTemp("", "rocketrides-chaos-*.log")
		if err != nil {
			return nil, fmt.Errorf("error creating log file: %w", err)
		}
		return f, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("error creating log file: %w", err)
	}
	return f, nil
}

func seconds(d time.Duration) float64 {
	return float64(d.Round(100*time.Millisecond)) / float64(time.Second)
}
