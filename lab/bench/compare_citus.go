package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/cituscluster"
	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
)

// The Citus comparison (-compare-citus) prices Citus on one machine: the API and the twotx
// reference at -clients clients, first on a single durable Postgres and then on a durable Citus
// cluster, a coordinator and two workers, in the same run on the same machine, each on
// databases with the same history. Each side's API ÷ twotx says what the API costs over its SQL
// there; Citus ÷ plain says what Citus's coordinator, its hop to a worker and its three servers
// on the one machine cost each. What Citus buys, writes spread over machines, this cannot show.

// Sides of the Citus comparison.
const (
	sidePlain = "plain"
	sideCitus = "Citus"
)

// citusNodes are the servers of the Citus cluster, as cituscluster starts them: node i's log is
// citusNodes[i]'s.
var citusNodes = []string{"coordinator", "worker 1", "worker 2"}

// maxServerErrorsShown caps the errors of each Citus node that a failed run's message quotes.
const maxServerErrorsShown = 10

// runCompareCitus runs the Citus comparison and prints its table to stdout. It fails at once
// when Citus is not installed.
func runCompareCitus(ctx context.Context, opts *options, stdout, stderr io.Writer) int {
	if err := cituscluster.Installed(); err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}
	runs, err := compareCitus(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", err)
		return exitFailed
	}
	printCitus(stdout, opts, runs)
	return sidesExitCode(runs)
}

// compareCitus does the whole Citus comparison, returning the runs in the order plain twotx,
// plain API, Citus twotx, Citus API. Everything it starts is stopped before it returns.
func compareCitus(ctx context.Context, opts *options, progress io.Writer) ([]*measurement, error) {
	return compareSides(ctx, opts, progress, []side{
		{name: sidePlain, what: "single durable Postgres", start: func(ctx context.Context, opts *options, _ string) (*benchCluster, error) {
			return startDurableCluster(ctx, opts.clients, nil)
		}},
		{name: sideCitus, what: "durable Citus cluster", start: func(ctx context.Context, opts *options, workDir string) (*benchCluster, error) {
			return startDurableCitus(ctx, opts.clients, workDir)
		}},
	})
}

// startDurableCitus starts a Citus cluster, a coordinator and two workers, as a comparison's
// database server, every node durable as startDurableCluster's server is. Each node's log goes
// to a file in logDir, whose errors a failed run quotes.
//
// A worker takes a connection from the coordinator for each of the coordinator's sessions that
// reaches it, and more for a statement that spans its shards, whence twice the clients; every
// node has the same settings. pg_stat_statements, when installed, is loaded on every node, as
// it is on the plain side, and counts the statements the coordinator is sent.
func startDurableCitus(ctx context.Context, clients int, logDir string) (*benchCluster, error) {
	binDir, err := pgcluster.FindBinDir("")
	if err != nil {
		return nil, err
	}
	settings := durableSettings(2*clients + connectionsHeadroom)
	c := &benchCluster{binDir: binDir, statStatements: hasStatStatements(binDir)}
	if c.statStatements {
		settings["shared_preload_libraries"] = "citus,pg_stat_statements" // Citus must come first
	}
	logs, err := createNodeLogs(logDir)
	if err != nil {
		return nil, err
	}
	c.serverErrors = func() string { return serverErrors(logs) }
	cluster, err := cituscluster.Start(ctx, cituscluster.Config{
		Settings: settings,
		Logger: func(i int) *slog.Logger {
			return slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("error starting Citus: %w%s", err, serverErrors(logs)), closeAll(logs))
	}
	c.url, c.dataDir = cluster.Coordinator.URL, cluster.Coordinator.DataDir()
	c.stopped = func(ctx context.Context) error { return errors.Join(cluster.Stop(ctx), closeAll(logs)) }
	c.createEmpty = cluster.CreateDatabase
	for _, w := range cluster.Workers {
		c.workers = append(c.workers, w.URL)
	}
	if err := c.connectAdmin(ctx); err != nil {
		return nil, errors.Join(err, c.stop(ctx))
	}
	return c, nil
}

// createNodeLogs creates the log file of each Citus node in dir.
func createNodeLogs(dir string) ([]*os.File, error) {
	var logs []*os.File
	for i := range citusNodes {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("citus-node-%d.log", i)))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("error creating a Citus node's log: %w", err), closeAll(logs))
		}
		logs = append(logs, f)
	}
	return logs, nil
}

func closeAll(files []*os.File) error {
	var errs []error
	for _, f := range files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// serverErrors quotes the last errors each Citus node logged, a line each, or says there were
// none; it is appended to an error's message.
func serverErrors(logs []*os.File) string {
	var b strings.Builder
	for i, f := range logs {
		lines, err := errorLines(f.Name())
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %s", citusNodes[i], err)
			continue
		}
		if len(lines) > maxServerErrorsShown {
			fmt.Fprintf(&b, "\n  %s: ... %d errors before these", citusNodes[i], len(lines)-maxServerErrorsShown)
			lines = lines[len(lines)-maxServerErrorsShown:]
		}
		for _, line := range lines {
			fmt.Fprintf(&b, "\n  %s: %s", citusNodes[i], line)
		}
	}
	if b.Len() == 0 {
		return "\nthe Citus nodes logged no errors"
	}
	return "\nthe Citus nodes logged:" + b.String()
}

// startingUp is the error a server answers while it starts, which pgcluster's wait for it to
// accept connections draws from every node: no failure.
const startingUp = "the database system is starting up"

// errorLines returns the lines of a node's log that report an error, as the server wrote them.
func errorLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("error reading its log: %w", err)
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		// The logger quotes the server's line in line="...".
		_, line, ok := strings.Cut(scanner.Text(), ` line="`)
		if !ok {
			continue
		}
		line = strings.TrimSuffix(line, `"`)
		if strings.Contains(line, startingUp) {
			continue
		}
		for _, level := range []string{"ERROR:", "FATAL:", "PANIC:"} {
			if strings.Contains(line, level) {
				lines = append(lines, line)
				break
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("error reading its log: %w", err)
	}
	return lines, nil
}

// printCitus prints the Citus comparison: rides per second and latency of each run, and the
// ratios, and what the figures cannot say.
func printCitus(w io.Writer, opts *options, runs []*measurement) {
	fmt.Fprintf(w, "\nCitus's cost on one machine: %d clients for %s each, %d rides of history\n\n", opts.clients, opts.duration, opts.rides)
	printSides(w, runs, sidePlain, sideCitus, "Citus ÷ plain")
	for _, m := range runs {
		if m.aborted > 0 {
			printReplacements(w, opts, m)
		}
	}
	fmt.Fprintf(w, "\nThe Citus cluster's three nodes, a coordinator and two workers, share this machine's %d CPUs with each other and with the API and the clients: the figure measures Citus's overhead on one box, not its scale-out.\n",
		runtime.NumCPU())
}

// printReplacements says what the pgbench clients that Citus aborted cost a run: the rides lost
// with them, and the time their replacements took to start, a share of the run's client time
// in which those clients booked nothing, so that the run's figure understates the script's.
func printReplacements(w io.Writer, opts *options, m *measurement) {
	clientTime := time.Duration(opts.clients) * opts.duration
	lost := time.Duration(m.replaced) * m.replacementStartup
	fmt.Fprintf(w, "\n%s on %s: %d %s lost with the pgbench clients aborted when Citus failed their COMMIT with XX000 "+
		"(a worker's serialization failure, which pgbench cannot retry and the API does). "+
		"%d new pgbench processes took their riders over, each a median %.0f ms from its start to its first ride, mostly connecting: "+
		"about %.0f %% of the run's client time booking nothing, by which the figure understates the script.\n",
		m.target, m.side, m.aborted, plural(int(m.aborted), "ride"), m.replaced, ms(m.replacementStartup), percent(int64(lost), int64(clientTime)))
}
