package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// report is what the comparison measured, and on what.
type report struct {
	opts       *options
	db         *benchCluster
	fileSystem string // of the data directory, which is gone by the time the report prints
	settings   []setting
	history    []history
	runs       []*measurement
	// rounds are the pairs of runs of the API and the baseline that -rounds adds.
	rounds []roundPair
	// targets are the targets in the order they ran: targets, and the baseline if any.
	targets []string
	// placements are where the runs ran, in order, and where says what each means.
	placements []placement
	where      map[placement]string
}

// clientCounts are the numbers of clients each target runs at.
func (r *report) clientCounts() []int {
	if r.opts.clients == 1 {
		return []int{1}
	}
	return []int{1, r.opts.clients}
}

func (r *report) find(p placement, target string, clients int) *measurement {
	for _, m := range r.runs {
		if m.placement == p && m.target == target && m.clients == clients {
			return m
		}
	}
	return nil
}

// failed reports whether a call to the API ended badly, which makes its figures meaningless.
func (r *report) failed() bool {
	for _, m := range r.runs {
		if m.api != nil && m.api.failed() {
			return true
		}
	}
	return false
}

func (r *report) print(w io.Writer) {
	r.printSetting(w)
	for _, p := range r.placements {
		// A run that was asked to pin says so; the default, shared, prints as it always has.
		if r.opts.pin != pinOff {
			fmt.Fprintf(w, "\n%s: %s\n", strings.ToUpper(string(p[:1]))+string(p[1:]), r.where[p])
		}
		r.printRuns(w, p)
	}
	r.printRatios(w)
	r.printRounds(w)

	var failures []string
	for _, m := range r.runs {
		if m.api != nil {
			failures = append(failures, m.api.failures...)
		}
	}
	for i, msg := range failures {
		if i == maxFailuresShown {
			fmt.Fprintf(w, "FAILURE ... and %d more\n", len(failures)-i)
			break
		}
		fmt.Fprintf(w, "FAILURE %s\n", msg)
	}
}

// printRuns prints the runs in placement p: the table, the CPU each process spent, and the
// details of each run.
func (r *report) printRuns(w io.Writer, p placement) {
	fmt.Fprintf(w, "\n%-16s %7s %9s %10s %10s %10s %13s\n", "", "clients", "rides/s", "p50", "p99", "rollbacks", "commits/ride")
	for _, clients := range r.clientCounts() {
		for _, target := range r.targets {
			m := r.find(p, target, clients)
			fmt.Fprintf(w, "%-16s %7d %9.1f %10s %10s %10s %13s\n", target, clients, m.ridesPerSecond,
				formatMs(m.p50), formatMs(m.p99), fmt.Sprintf("%.1f %%", percent(m.rollbacks, m.commits+m.rollbacks)),
				perRide(m.commits, m.rides))
		}
	}

	r.printCPU(w, p)

	fmt.Fprintf(w, "\nRuns\n")
	for _, m := range r.runs {
		if m.placement == p {
			fmt.Fprintf(w, "  %-16s %3d %-8s %s\n", m.target, m.clients, plural(m.clients, "client"), r.details(m))
		}
	}
}

// printRatios prints the ratios of the API to the references, a column for each placement when
// there are two.
func (r *report) printRatios(w io.Writer) {
	n := r.opts.clients
	fmt.Fprintf(w, "\nRatios\n")
	if len(r.placements) > 1 {
		fmt.Fprintf(w, "  %-52s", "")
		for _, p := range r.placements {
			fmt.Fprintf(w, " %8s", p)
		}
		fmt.Fprintln(w)
	}
	type ratioRow struct {
		label string
		value func(p placement) string
	}
	rows := []ratioRow{
		{fmt.Sprintf("API rides/s / article pgbench rides/s, %d %s", n, plural(n, "client")), func(p placement) string {
			return ratio(r.find(p, targetAPI, n).ridesPerSecond, r.find(p, targetArticle, n).ridesPerSecond)
		}},
		{fmt.Sprintf("API rides/s / twotx pgbench rides/s, %d %s", n, plural(n, "client")), func(p placement) string {
			return ratio(r.find(p, targetAPI, n).ridesPerSecond, r.find(p, targetTwoTx, n).ridesPerSecond)
		}},
		{"API p50 / twotx pgbench p50, 1 client", func(p placement) string {
			return ratio(float64(r.find(p, targetAPI, 1).p50), float64(r.find(p, targetTwoTx, 1).p50))
		}},
		{fmt.Sprintf("API p99 / API p50, %d %s", n, plural(n, "client")), func(p placement) string {
			apiN := r.find(p, targetAPI, n)
			return ratio(float64(apiN.p99), float64(apiN.p50))
		}},
		{"API 409 answers, all runs", func(p placement) string {
			var conflicts int64
			for _, m := range r.runs {
				if m.target == targetAPI && m.placement == p {
					conflicts += m.api.conflicts
				}
			}
			return fmt.Sprintf("%d", conflicts)
		}},
	}
	if b := r.opts.baseline; b != nil {
		// Each of the API's own figures over the baseline's, in the same run.
		perRideRatio := func(p placement, of func(m *measurement) float64) string {
			api, base := r.find(p, targetAPI, n), r.find(p, b.target(), n)
			if api.rides == 0 || base.rides == 0 {
				return "n/a"
			}
			return ratio(of(api)/float64(api.rides), of(base)/float64(base.rides))
		}
		clients := fmt.Sprintf(", %d %s", n, plural(n, "client"))
		rows = append(rows,
			ratioRow{"API CPU per ride ÷ baseline's" + clients, func(p placement) string {
				return perRideRatio(p, func(m *measurement) float64 { return float64(m.cpu.api) })
			}},
			ratioRow{"API alloc KB per ride ÷ baseline's" + clients, func(p placement) string {
				return perRideRatio(p, func(m *measurement) float64 { return m.cpu.allocBytes })
			}},
			ratioRow{"API allocations per ride ÷ baseline's" + clients, func(p placement) string {
				return perRideRatio(p, func(m *measurement) float64 { return m.cpu.allocs })
			}},
			ratioRow{"API rides/s ÷ baseline's" + clients, func(p placement) string {
				return ratio(r.find(p, targetAPI, n).ridesPerSecond, r.find(p, b.target(), n).ridesPerSecond)
			}},
		)
	}
	for _, row := range rows {
		fmt.Fprintf(w, "  %-52s", row.label)
		for _, p := range r.placements {
			fmt.Fprintf(w, " %8s", row.value(p))
		}
		fmt.Fprintln(w)
	}
}

// printCPU prints the CPU time each process spent a ride in each run, from /proc, and the API's
// allocations a ride, from its Go runtime. For pgbench, the load generator is pgbench and the
// stand-in idles; for the API, the load generator is the bench.
func (r *report) printCPU(w io.Writer, p placement) {
	fmt.Fprintf(w, "\nCPU per ride, µs of user + system time; the API's allocations per ride\n")
	fmt.Fprintf(w, "%-16s %7s %9s %9s %9s %9s %9s %9s %9s\n", "", "clients", "API", "Postgres", "load gen", "stand-in", "all", "alloc KB", "allocs")
	for _, clients := range r.clientCounts() {
		for _, target := range r.targets {
			m := r.find(p, target, clients)
			if m.cpu == nil {
				continue
			}
			api, kb, allocs := "-", "-", "-"
			if m.api != nil {
				api, kb, allocs = microsPerRide(m.cpu.api, m.rides), kbPerRide(m.cpu.allocBytes, m.rides), countPerRide(m.cpu.allocs, m.rides)
			}
			fmt.Fprintf(w, "%-16s %7d %9s %9s %9s %9s %9s %9s %9s\n", target, clients, api,
				microsPerRide(m.cpu.postgres, m.rides), microsPerRide(m.cpu.loadGenerator, m.rides),
				microsPerRide(m.cpu.standIn, m.rides), microsPerRide(m.cpu.total(), m.rides), kb, allocs)
		}
	}
}

// printSetting prints what the figures were measured on.
func (r *report) printSetting(w io.Writer) {
	settings := map[string]string{}
	for _, s := range r.settings {
		settings[s.name] = s.value
	}
	join := func(names ...string) string {
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = name + "=" + settings[name]
		}
		return strings.Join(parts, " ")
	}
	var history []string
	for _, h := range r.history {
		history = append(history, fmt.Sprintf("%s %d rides %d riders", h.dbname, h.rides, h.riders))
	}

	fmt.Fprintf(w, "Rocket Rides compare: the API and two pgbench references on one durable cluster, in one run\n")
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-11s %s\n", label, fmt.Sprintf(format, args...))
	}
	row("machine", "%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	row("postgres", "%s, %s, data on %s", settings["server_version"], r.db.binDir, r.fileSystem)
	row("durability", "%s", join("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method"))
	row("server", "%s", join("shared_buffers", "max_wal_size", "checkpoint_timeout", "max_connections", "shared_preload_libraries"))
	row("history", "%s (-rides %d -riders %d, and %d bench riders)", strings.Join(history, ", "), r.opts.rides, r.opts.riders, r.opts.clients)
	row("article", "pgbench, 4 SERIALIZABLE transactions per ride, ids from sequences (schema version %d)", articleSchemaVersion)
	row("twotx", "pgbench, 2 SERIALIZABLE transactions per ride, random ids (schema as migrated)")
	row("pgbench", "-c clients -j %d -T duration -n -M prepared --max-tries=%d (article %d); one script execution is one ride",
		pgbenchThreads, maxTriesOf[targetTwoTx], maxTriesOf[targetArticle])
	pool := "its default pool"
	if r.opts.apiPoolConns > 0 {
		pool = fmt.Sprintf("pool_max_conns=%d", r.opts.apiPoolConns)
	}
	row("API", "cmd/api with LOG_LEVEL=warn and %s; the Stripe stand-in (cmd/fakestripe) at no latency; retrying client, a rider per client", pool)
	if b := r.opts.baseline; b != nil {
		row("baseline", "%s: cmd/api at %s (-baseline %s), built from a worktree of it with its own go.mod, run as the API right after it",
			b.target(), b.commit, r.opts.baselineRev)
	}
	row("CPU", "from /proc, from just before the load to the end of the run's sessions; Postgres is its postmaster and every process it forked, exited ones included")
	row("runs", "1 client for %s, %d %s for %s; a CHECKPOINT before each", r.opts.soloDuration, r.opts.clients, plural(r.opts.clients, "client"), r.opts.duration)
}

// details are what a run's row has no room for.
func (r *report) details(m *measurement) string {
	parts := []string{fmt.Sprintf("%d rides in %.1f s", m.rides, m.elapsed.Seconds())}
	if m.api != nil {
		parts = append(parts,
			fmt.Sprintf("%d answers 409", m.api.conflicts),
			fmt.Sprintf("%s attempts/ride", perRide(int64(m.api.attempts), int64(m.api.calls[kindNew]))),
			fmt.Sprintf("%d database %s", m.connections, plural(int(m.connections), "connection")))
		if m.api.unknown+m.api.unexpected > 0 {
			parts = append(parts, fmt.Sprintf("%d unknown outcomes, %d unexpected errors", m.api.unknown, m.api.unexpected))
		}
	} else {
		tries := "tries"
		if m.maxTries == 1 {
			tries = "try"
		}
		parts = append(parts, fmt.Sprintf("%d retries of serialization failures and deadlocks (%d rides retried, %d failed after %d %s)",
			m.retries, m.ridesRetried, m.ridesFailed, m.maxTries, tries))
	}
	if r.db.statStatements {
		parts = append(parts, fmt.Sprintf("%s statements/ride, %d distinct", perRide(m.calls, m.rides), m.statements))
	}
	if m.cpu != nil {
		parts = append(parts, m.cpu.where())
	}
	return strings.Join(parts, "; ")
}

func formatMs(d time.Duration) string { return fmt.Sprintf("%.1f ms", ms(d)) }

func percent(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

func perRide(n, rides int64) string {
	if rides == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(rides))
}

// microsPerRide is d a ride, in whole microseconds.
func microsPerRide(d time.Duration, rides int64) string {
	if rides == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)/float64(rides))
}

// kbPerRide is bytes a ride, in kilobytes of 1,024 bytes.
func kbPerRide(bytes float64, rides int64) string {
	if rides == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", bytes/1024/float64(rides))
}

// countPerRide is n a ride, whole.
func countPerRide(n float64, rides int64) string {
	if rides == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", n/float64(rides))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
