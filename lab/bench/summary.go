package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

func (r *result) print(w io.Writer, opts *options) {
	fmt.Fprintf(w, "Rocket Rides bench: %d clients, %s, replay share %.2f, %s\n",
		opts.clients, opts.duration, opts.replayShare, opts.apiURL)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t%s\n", label, fmt.Sprintf(format, args...))
	}
	calls := r.calls[kindNew] + r.calls[kindReplay]
	seconds := r.elapsed.Seconds()

	row("requests", "%d client calls (%d new keys, %d replays)", calls, r.calls[kindNew], r.calls[kindReplay])
	row("rides booked", "%d", r.booked)
	row("replays", "%d", r.replays)
	row("refusals", "%d", r.refusals)
	row("unknown outcomes", "%d", r.unknown)
	row("unexpected errors", "%d", r.unexpected)
	row("replay mismatches", "%d", r.mismatches)
	row("409 answers", "%d, retried within the calls", r.conflicts)
	row("throughput", "%.1f rides/s, %.1f calls/s over %.1f s", float64(r.booked)/seconds, float64(calls)/seconds, seconds)
	row("latency, new keys", "%s", formatLatencies(r.latencies[kindNew]))
	if r.calls[kindReplay] > 0 {
		row("latency, replays", "%s", formatLatencies(r.latencies[kindReplay]))
	}
	if calls > 0 {
		row("attempts per call", "%.2f on average, %d at most", float64(r.attempts)/float64(calls), r.maxAttempt)
	}
	_ = tw.Flush() // stdout; nothing to do if it fails

	for i, msg := range r.failures {
		if i == maxFailuresShown {
			fmt.Fprintf(w, "FAILURE ... and %d more\n", len(r.failures)-i)
			break
		}
		fmt.Fprintf(w, "FAILURE %s\n", msg)
	}
}

// formatLatencies gives percentiles by nearest rank: the smallest latency that at least that
// share of calls did not exceed.
func formatLatencies(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no calls"
	}
	sorted := slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms",
		ms(percentile(sorted, 0.50)), ms(percentile(sorted, 0.90)), ms(percentile(sorted, 0.99)), ms(sorted[len(sorted)-1]))
}

// percentile is the smallest of sorted (in increasing order, not empty) that at least share p of
// them do not exceed: the nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[max(int(math.Ceil(p*float64(len(sorted))))-1, 0)]
}

// ms is d in milliseconds, for printing.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
