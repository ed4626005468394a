package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// receiptsReport is what the receipt measurement saw.
type receiptsReport struct {
	bookings int
	receipts []*receiptTimeline
	idle     *idleCost // nil without -idle
}

func (r *receiptsReport) print(w io.Writer) {
	fmt.Fprintf(w, "Receipts: %d rides booked one after another; API, enqueuer, one worker, completer and reaper\n", r.bookings)
	fmt.Fprintf(w, "as processes on their defaults (the API with RATE_LIMITS=off), a durable Postgres, an SMTP server\n")
	fmt.Fprintf(w, "in the bench; %d CPUs.\n\n", runtime.NumCPU())

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tp50\tp90\tmax\t\n")
	for _, stage := range receiptStages {
		spans := make([]time.Duration, len(r.receipts))
		for i, tl := range r.receipts {
			spans[i] = stage.span(tl)
		}
		slices.Sort(spans)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", stage.label,
			formatMs(percentile(spans, 0.50)), formatMs(percentile(spans, 0.90)), formatMs(spans[len(spans)-1]))
	}
	_ = tw.Flush() // stdout; nothing to do if it fails
	retried := 0
	for _, tl := range r.receipts {
		if tl.attempts > 1 {
			retried++
		}
	}
	if retried > 0 {
		fmt.Fprintf(w, "(%d receipts took more than one attempt; their fetch is their last attempt's)\n", retried)
	}

	if r.idle == nil {
		return
	}
	seconds := r.idle.window.Seconds()
	fmt.Fprintf(w, "\nIdle: what the stack sends the database over %s with nothing to do\n", r.idle.window)
	if len(r.idle.processes) == 0 {
		fmt.Fprintf(w, "  (pg_stat_statements is not installed: no figures per process)\n")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	if len(r.idle.processes) > 0 {
		fmt.Fprintf(tw, "\tstatements/s\tof which BEGIN/COMMIT/ROLLBACK\t\n")
		var total int64
		for _, p := range r.idle.processes {
			total += p.statements
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", p.process, float64(p.statements)/seconds, float64(p.transactionControl)/seconds)
		}
		fmt.Fprintf(tw, "all\t%.2f\t\t\n", float64(total)/seconds)
	}
	fmt.Fprintf(tw, "commits/s (pg_stat_database)\t%.2f\t\t\n", float64(r.idle.commits)/seconds)
	_ = tw.Flush()
}
