package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scriptFiles are the pgbench scripts, one execution of which is one ride.
//
//go:embed scripts/*.sql
var scriptFiles embed.FS

var scriptOf = map[string]string{targetArticle: "scripts/article.sql", targetTwoTx: "scripts/twotx.sql"}

// pgbench's settings, besides -M prepared, which is how pgx runs the API's statements too.
const (
	// pgbenchThreads drive pgbench's clients: one per core of the 2-core machine the comparison
	// was first measured on, so that pgbench is never what limits a run.
	pgbenchThreads = 2
)

// maxTriesOf is how often pgbench tries a ride that fails with a serialization failure or a
// deadlock before it counts the ride as failed and goes on to the next one. pgbench retries at
// once, with no backoff, from the top of the script; the scripts then resume where the failed
// try left the key, as a client retrying a 409 does.
//
// The article's reference tries once. Its server answered a serialization failure with a 409
// and left the retry to the client, with the client's backoff; pgbench's immediate retries
// instead make its 32 clients, whose every transaction touches the same index pages, abort
// each other over and over (below 10 rides/s), which would measure pgbench, not the design.
// A failed ride is counted apart and not as a ride, so the reference only gains by this.
var maxTriesOf = map[string]int{targetArticle: 1, targetTwoTx: 100}

// writeScripts writes the scripts where pgbench can read them, and returns their paths by target.
func writeScripts(dir string) (map[string]string, error) {
	paths := map[string]string{}
	for target, name := range scriptOf {
		script, err := scriptFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(path, script, 0o644); err != nil {
			return nil, fmt.Errorf("error writing %s: %w", path, err)
		}
		paths[target] = path
	}
	return paths, nil
}

// pgbenchArgs are pgbench's arguments for a run of script at clients clients, which writes a line
// per ride to files starting with logPrefix.
func pgbenchArgs(script, databaseURL, logPrefix string, maxTries, clients int, duration time.Duration) []string {
	return []string{
		"-n", // no VACUUM of pgbench's own tables, which these databases do not have
		"-M", "prepared",
		"-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(min(pgbenchThreads, clients)),
		"-T", strconv.Itoa(int(duration / time.Second)),
		"--max-tries=" + strconv.Itoa(maxTries),
		"--log", "--log-prefix=" + logPrefix,
		"-f", script,
		databaseURL,
	}
}

// runPgbench runs script on dbname and measures it.
func (c *benchCluster) runPgbench(ctx context.Context, script, dbname string, maxTries, clients int, duration time.Duration, workDir string) (*measurement, error) {
	logPrefix := filepath.Join(workDir, fmt.Sprintf("%s_%d", dbname, clients))
	before, err := c.startRun(ctx, dbname)
	if err != nil {
		return nil, err
	}

	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "pgbench"),
		pgbenchArgs(script, c.url(dbname), logPrefix, maxTries, clients, duration)...)
	// Like the server, pgbench dies with us, and a Ctrl-C in the terminal reaches only us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // we killed it
		}
		return nil, fmt.Errorf("error running pgbench: %w\n%s", err, out.String())
	}

	m, err := parsePgbenchOutput(out.String())
	if err != nil {
		return nil, err
	}
	m.elapsed, m.maxTries = duration, maxTries
	latencies, err := readPgbenchLogs(logPrefix)
	if err != nil {
		return nil, err
	}
	if len(latencies) > 0 {
		m.p50, m.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	}
	if err := c.endRun(ctx, dbname, before, m); err != nil {
		return nil, err
	}
	return m, nil
}

// What pgbench prints at the end of a run. tps counts the rides that succeeded.
var (
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	pgbenchRetried   = regexp.MustCompile(`(?m)^number of transactions retried: (\d+)`)
	pgbenchRetries   = regexp.MustCompile(`(?m)^total number of retries: (\d+)`)
)

func parsePgbenchOutput(out string) (*measurement, error) {
	find := func(re *regexp.Regexp) (string, error) {
		m := re.FindStringSubmatch(out)
		if m == nil {
			return "", fmt.Errorf("no %q in pgbench's output:\n%s", re, out)
		}
		return m[1], nil
	}
	m := &measurement{}
	tps, err := find(pgbenchTPS)
	if err != nil {
		return nil, err
	}
	if m.ridesPerSecond, err = strconv.ParseFloat(tps, 64); err != nil {
		return nil, fmt.Errorf("error parsing pgbench's tps: %w", err)
	}
	for re, dst := range map[*regexp.Regexp]*int64{
		pgbenchProcessed: &m.rides, pgbenchFailed: &m.ridesFailed,
		pgbenchRetried: &m.ridesRetried, pgbenchRetries: &m.retries,
	} {
		s, err := find(re)
		if err != nil && (re == pgbenchRetried || re == pgbenchRetries) {
			continue // pgbench reports retries only when it may retry (--max-tries above 1)
		}
		if err != nil {
			return nil, err
		}
		if *dst, err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("error parsing pgbench's output: %w", err)
		}
	}
	return m, nil
}

// readPgbenchLogs reads pgbench's per-transaction logs, one file per thread, and returns the
// latencies of the rides that succeeded, sorted. A line is "client_id transaction_no time
// script_no time_epoch time_us [retries]", where time is the latency in microseconds, every
// try included, or a word such as "serialization" for a ride that failed.
func readPgbenchLogs(logPrefix string) ([]time.Duration, error) {
	files, err := filepath.Glob(logPrefix + ".*")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no pgbench logs %s.*", logPrefix)
	}
	var latencies []time.Duration
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("error reading pgbench's log: %w", err)
		}
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			fields := strings.Fields(scanner.Text())
			if len(fields) < 3 {
				continue
			}
			if us, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
				latencies = append(latencies, time.Duration(us)*time.Microsecond)
			}
		}
		err = scanner.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("error reading pgbench's log: %w", err)
		}
	}
	slices.Sort(latencies)
	return latencies, nil
}
