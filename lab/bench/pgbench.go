package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// per ride to files starting with logPrefix. The twotx script's client i is bench rider
// firstRider + i.
func pgbenchArgs(script, databaseURL, logPrefix string, maxTries, clients, firstRider int, duration time.Duration) []string {
	return []string{
		"-n", // no VACUUM of pgbench's own tables, which these databases do not have
		"-M", "prepared",
		"-c", strconv.Itoa(clients),
		"-D", "first_rider=" + strconv.Itoa(firstRider),
		"-j", strconv.Itoa(min(pgbenchThreads, clients)),
		"-T", strconv.Itoa(int(duration / time.Second)),
		"--max-tries=" + strconv.Itoa(maxTries),
		"--log", "--log-prefix=" + logPrefix,
		"-f", script,
		databaseURL,
	}
}

// runPgbench runs script on dbname and measures it. On a Citus cluster a client that pgbench
// aborts because Citus failed its COMMIT is replaced (see pgbench_citus.go).
func (c *benchCluster) runPgbench(ctx context.Context, script, dbname string, maxTries, clients int, duration time.Duration, workDir string) (*measurement, error) {
	logPrefix := filepath.Join(workDir, fmt.Sprintf("%s_%d", dbname, clients))
	before, err := c.startRun(ctx, dbname)
	if err != nil {
		return nil, err
	}
	var cpuBefore cpuReading
	if c.cpu != nil {
		if cpuBefore, err = c.cpu.read(); err != nil {
			return nil, err
		}
	}

	run := &pgbenchRun{
		binary:      filepath.Join(c.binDir, "pgbench"),
		script:      script,
		databaseURL: c.url(dbname),
		maxTries:    maxTries,
		replace:     len(c.workers) > 0,
		deadline:    time.Now().Add(duration),
	}
	run.start(ctx, logPrefix, clients, 0, duration)
	run.wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err() // we killed it
	}
	m, err := run.measure(duration)
	if err != nil {
		return nil, err
	}
	m.elapsed, m.maxTries = duration, maxTries
	if err := c.endRun(ctx, dbname, before, m); err != nil {
		return nil, err
	}
	if c.cpu != nil {
		if m.cpu, err = c.cpu.since(cpuBefore); err != nil {
			return nil, err
		}
		// The load generator is pgbench; the bench only waited for it.
		m.cpu.loadGenerator, m.cpu.cpusLoadGenerator = 0, run.procs[0].cpus
		for _, p := range run.procs {
			m.cpu.loadGenerator += p.cpu
		}
	}
	return m, nil
}

// pgbenchRun is one run of a script: a pgbench process with every client and, on a Citus
// cluster, one more of one client for each client the others aborted after Citus failed its
// COMMIT, which runs on to the deadline in its stead.
type pgbenchRun struct {
	binary, script, databaseURL string
	maxTries                    int
	replace                     bool      // whether to replace such clients
	deadline                    time.Time // when the first process stops starting rides

	wg           sync.WaitGroup
	mu           sync.Mutex
	procs        []*pgbenchProc // the first is the one with every client
	replacements int            // started so far, which numbers their logs
}

// pgbenchProc is one pgbench process of a run: what it printed and how it ended. Its own
// goroutine writes it until the run's WaitGroup is done.
type pgbenchProc struct {
	logPrefix  string
	firstRider int // of its client 0
	stdout     bytes.Buffer
	stderr     []string
	aborts     int // of clients whose COMMIT Citus failed
	err        error
	startedAt  time.Time
	cpu        time.Duration // user + system, once it has exited
	cpus       string        // the CPUs it was allowed on, as the kernel lists them
}

// start starts a pgbench of clients clients, the first being bench rider firstRider, for
// duration, writing its logs to files starting with logPrefix, and returns at once.
func (r *pgbenchRun) start(ctx context.Context, logPrefix string, clients, firstRider int, duration time.Duration) {
	p := &pgbenchProc{logPrefix: logPrefix, firstRider: firstRider, startedAt: time.Now()}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		p.err = r.runProc(ctx, p, clients, duration)
	}()
}

// runProc runs p's pgbench to its end, reading what it says as it says it, to replace at once
// each client that it aborts after Citus failed the client's COMMIT.
func (r *pgbenchRun) runProc(ctx context.Context, p *pgbenchProc, clients int, duration time.Duration) error {
	cmd := exec.CommandContext(ctx, r.binary, pgbenchArgs(r.script, r.databaseURL, p.logPrefix, r.maxTries, clients, p.firstRider, duration)...)
	// Like the server, pgbench dies with us, and a Ctrl-C in the terminal reaches only us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Stdout = &p.stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("error starting pgbench: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("error starting pgbench: %w", err)
	}
	p.cpus, err = readCPUs("/proc", cmd.Process.Pid)
	if err != nil {
		p.cpus = "unknown" // it exited already: the run's outcome says why
	}
	scanner := bufio.NewScanner(stderr)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		p.stderr = append(p.stderr, line)
		if m := pgbenchCitusAbort.FindStringSubmatch(line); r.replace && m != nil {
			p.aborts++
			client, _ := strconv.Atoi(m[1])
			r.replace1(ctx, p.firstRider+client)
		}
	}
	if err := scanner.Err(); err != nil {
		// A line too long to read: the rest must still be read, or pgbench blocks writing it.
		p.stderr = append(p.stderr, fmt.Sprintf("(error reading pgbench's output: %s)", err))
		_, _ = io.Copy(io.Discard, stderr)
	}
	err = cmd.Wait()
	if cmd.ProcessState != nil {
		p.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return err
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
	tps, err := find(pgbenchTPS)
	if err != nil && m.rides == 0 {
		return m, nil // pgbench prints no rate when it processed nothing (all its clients aborted)
	}
	if err != nil {
		return nil, err
	}
	if m.ridesPerSecond, err = strconv.ParseFloat(tps, 64); err != nil {
		return nil, fmt.Errorf("error parsing pgbench's tps: %w", err)
	}
	return m, nil
}

// pgbenchRide is a ride that pgbench's log shows succeeded: when it ended and how long it took,
// every try included.
type pgbenchRide struct {
	end     time.Time
	latency time.Duration
}

// start is when the ride started.
func (r pgbenchRide) start() time.Time { return r.end.Add(-r.latency) }

// readPgbenchLogs reads pgbench's per-transaction logs, one file per thread, and returns the rides
// that succeeded. A line is "client_id transaction_no time script_no time_epoch time_us
// [retries]", where time is the latency in microseconds or a word such as "serialization" for a
// ride that failed, and time_epoch and time_us say when the ride ended.
func readPgbenchLogs(logPrefix string) ([]pgbenchRide, error) {
	files, err := filepath.Glob(logPrefix + ".*")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no pgbench logs %s.*", logPrefix)
	}
	var rides []pgbenchRide
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("error reading pgbench's log: %w", err)
		}
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			if ride, ok := parsePgbenchLogLine(scanner.Text()); ok {
				rides = append(rides, ride)
			}
		}
		err = scanner.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("error reading pgbench's log: %w", err)
		}
	}
	return rides, nil
}

// parsePgbenchLogLine reads a line of pgbench's log, which it reports as no ride unless the ride
// succeeded.
func parsePgbenchLogLine(line string) (pgbenchRide, bool) {
	fields := strings.Fields(line)
	if len(fields) < 6 {
		return pgbenchRide{}, false
	}
	us, err1 := strconv.ParseInt(fields[2], 10, 64)
	sec, err2 := strconv.ParseInt(fields[4], 10, 64)
	usec, err3 := strconv.ParseInt(fields[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return pgbenchRide{}, false
	}
	return pgbenchRide{end: time.Unix(sec, usec*1000), latency: time.Duration(us) * time.Microsecond}, true
}

// latenciesOf returns the latencies of the rides that ended by until, or of all of them when
// until is zero, sorted.
func latenciesOf(rides []pgbenchRide, until time.Time) []time.Duration {
	var latencies []time.Duration
	for _, r := range rides {
		if until.IsZero() || !r.end.After(until) {
			latencies = append(latencies, r.latency)
		}
	}
	slices.Sort(latencies)
	return latencies
}
