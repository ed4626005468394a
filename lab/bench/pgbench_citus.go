package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// On a Citus cluster, a serialization failure that a worker finds at COMMIT reaches the client
// as XX000 "could not commit transaction for shard … on at least one active node", the 40001
// only in a WARNING before it (docs/scale-out.md). The API retries it like any other
// serialization failure; pgbench retries only an error whose SQLSTATE is 40001 or 40P01 and
// aborts the client on any other, which then books nothing for the rest of the run. Most of the
// twotx script's serialization failures on Citus come at COMMIT: at 32 clients on 300 riders'
// history, pgbench alone lost 24 of its 32 clients so in 15 s.
//
// So on a Citus cluster a run replaces each client that pgbench aborts so, as soon as pgbench
// says it has: a new pgbench of one client takes over its rider (first_rider in the script) and
// runs on to the deadline in its stead. The ride the aborted client was booking is lost, and
// counted apart; a replacement's rides count up to the deadline, which it runs a little past,
// -T taking whole seconds. A replacement is no retry: it starts a process and connects to the
// coordinator, which on a loaded machine took a median half a second, when pgbench would have
// retried at once. The run measures how long, and the table says so: the figure understates the
// script on Citus by that much at least.

// pgbenchCitusAbort is what pgbench says when it aborts a client whose COMMIT Citus failed.
var pgbenchCitusAbort = regexp.MustCompile(`^pgbench: error: client (\d+) script \d+ aborted in command \d+ query \d+: ERROR:  could not commit transaction for shard \d+ on at least one active node`)

// pgbenchAbort is what pgbench says when it aborts a client, whatever the cause.
var pgbenchAbort = regexp.MustCompile(`^pgbench: error: client \d+ script \d+ aborted in command`)

// pgbenchSerializationWarning is the WARNING in which Citus passes on a worker's serialization
// failure at COMMIT, which libpq prints on pgbench's stderr.
var pgbenchSerializationWarning = regexp.MustCompile(`^WARNING:  could not serialize access`)

// replace1 starts a pgbench of one client, bench rider rider, that runs from now to the
// deadline, and a moment past it, unless the deadline has passed.
func (r *pgbenchRun) replace1(ctx context.Context, rider int) {
	remaining := time.Until(r.deadline)
	if remaining <= 0 {
		return
	}
	r.mu.Lock()
	r.replacements++
	logPrefix := fmt.Sprintf("%s_replacement%d", r.procs[0].logPrefix, r.replacements)
	r.mu.Unlock()
	seconds := (remaining + time.Second - 1) / time.Second // rounded up
	r.start(ctx, logPrefix, 1, rider, seconds*time.Second)
}

// measure sums up the run once every pgbench has ended: the first's figures, as pgbench gives
// them, and the rides its replacements booked by the deadline.
func (r *pgbenchRun) measure(duration time.Duration) (*measurement, error) {
	var aborts, warnings int
	for _, p := range r.procs {
		if err := p.check(); err != nil {
			return nil, err
		}
		aborts += p.aborts
		for _, line := range p.stderr {
			if pgbenchSerializationWarning.MatchString(line) {
				warnings++
			}
		}
	}
	// Every replaced client stands for a serialization failure, which Citus warned of first.
	if warnings < aborts {
		return nil, fmt.Errorf("pgbench: Citus failed %d COMMITs with XX000 but warned of only %d serialization failures:\n%s",
			aborts, warnings, r.procs[0].output())
	}

	m, err := parsePgbenchOutput(r.procs[0].stdout.String())
	if err != nil {
		return nil, err
	}
	m.aborted = int64(aborts)
	rides, err := readPgbenchLogs(r.procs[0].logPrefix)
	if err != nil {
		return nil, err
	}
	latencies := latenciesOf(rides, time.Time{})
	var startups []time.Duration // of the replacements that booked a ride by the deadline
	for _, p := range r.procs[1:] {
		replaced, err := parsePgbenchOutput(p.stdout.String())
		if err != nil {
			return nil, err
		}
		m.retries += replaced.retries
		m.ridesRetried += replaced.ridesRetried
		m.ridesFailed += replaced.ridesFailed
		rides, err := readPgbenchLogs(p.logPrefix)
		if err != nil {
			return nil, err
		}
		booked := latenciesOf(rides, r.deadline)
		m.rides += int64(len(booked))
		m.ridesPerSecond += float64(len(booked)) / duration.Seconds()
		latencies = append(latencies, booked...)
		if len(booked) > 0 {
			startups = append(startups, firstStart(rides).Sub(p.startedAt))
		}
	}
	slices.Sort(latencies)
	if len(latencies) > 0 {
		m.p50, m.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	}
	m.replaced = int64(len(r.procs) - 1)
	if len(startups) > 0 {
		slices.Sort(startups)
		m.replacementStartup = percentile(startups, 0.50)
	}
	return m, nil
}

// firstStart is when the first of rides started.
func firstStart(rides []pgbenchRide) time.Time {
	first := rides[0].start()
	for _, r := range rides[1:] {
		if r.start().Before(first) {
			first = r.start()
		}
	}
	return first
}

// check returns the error of a pgbench that failed: one that exited with an error, unless it
// did so only because it aborted clients whose COMMIT Citus failed, which were replaced.
func (p *pgbenchProc) check() error {
	if p.err == nil {
		return nil
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) && exitErr.ExitCode() == 2 && p.aborts > 0 && p.aborts == countMatches(p.stderr, pgbenchAbort) {
		return nil
	}
	return fmt.Errorf("error running pgbench: %w\n%s", p.err, p.output())
}

// output is everything p printed, its summary last.
func (p *pgbenchProc) output() string {
	return strings.Join(p.stderr, "\n") + "\n" + p.stdout.String()
}

func countMatches(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, line := range lines {
		if re.MatchString(line) {
			n++
		}
	}
	return n
}
