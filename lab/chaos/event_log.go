package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rocketrides/rocketrides/phases"
)

// eventLog is the log file of the stack's output, read as it is written. Some faults are
// injected inside the processes (an API crashing itself at a fault point, the Stripe stand-in
// acting on a queued fault) and only their logs tell when they really fired; the harness counts
// those lines rather than guessing from what it asked for.
type eventLog struct {
	w io.Writer

	mu                sync.Mutex
	selfCrashes       map[string]int // API self-crashes by fault point
	crashesOf         map[string]int // API self-crashes by process label
	stalls            map[string]int // API stalls by fault point
	stripeFaults      map[string]int // Stripe stand-in faults that struck, by kind
	completerFinished int            // keys the completer pushed to the end
	fenced            int            // requests answered 409 after running past the lock timeout
	receiptRaces      int            // receipts (of rides, of refunds) recorded by another job meanwhile
}

// The log lines counted, in the text format of the processes' slog handler.
var (
	selfCrashLine   = regexp.MustCompile(`msg="Faults: crashing" point=(\S+)`)
	stallLine       = regexp.MustCompile(`msg="Faults: stalling" point=(\S+)`)
	stripeFaultLine = regexp.MustCompile(`msg="Fakestripe: injecting fault" fault=(\S+)`)
	completerLine   = regexp.MustCompile(`msg="Completer: pushed keys" num_succeeded=(\d+)`)
	receiptRaceLine = regexp.MustCompile(`msg="Worker: (?:refund )?receipt was recorded by another job meanwhile`)
	conflictLine    = regexp.MustCompile(`msg="API: request" method=POST path=/rides(?:/\d+/cancel)? status=409 duration=(\S+)`)
)

func newEventLog(w io.Writer) *eventLog {
	return &eventLog{w: w, selfCrashes: map[string]int{}, crashesOf: map[string]int{}, stalls: map[string]int{}, stripeFaults: map[string]int{}}
}

// Write takes the output of supervisor.PrefixWriter, which writes one whole line per call.
func (l *eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := selfCrashLine.FindSubmatch(p); m != nil {
		l.selfCrashes[string(m[1])]++
		if label, _, ok := strings.Cut(string(p), "|"); ok {
			l.crashesOf[strings.TrimSpace(label)]++
		}
	}
	if m := stallLine.FindSubmatch(p); m != nil {
		l.stalls[string(m[1])]++
	}
	if m := stripeFaultLine.FindSubmatch(p); m != nil {
		l.stripeFaults[string(m[1])]++
	}
	if m := completerLine.FindSubmatch(p); m != nil {
		n, _ := strconv.Atoi(string(m[1])) // \d+ always parses
		l.completerFinished += n
	}
	if receiptRaceLine.Match(p) {
		l.receiptRaces++
	}
	// A 409 that took longer than the lease is a request that lost its key while it ran
	// (ErrLockLost): it was fenced off. A 409 for a key in use comes back at once.
	if m := conflictLine.FindSubmatch(p); m != nil {
		if d, err := time.ParseDuration(string(m[1])); err == nil && d >= phases.LockLeaseDefault {
			l.fenced++
		}
	}
	return l.w.Write(p)
}

// note writes a line of the harness's own into the log, so that the log reads as one story.
func (l *eventLog) note(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%-11s | %s %s\n", "chaos", time.Now().Format("15:04:05.000"), text)
}

// crashes returns how often the process labelled label crashed itself at a fault point.
func (l *eventLog) crashes(label string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.crashesOf[label]
}

// eventCounts is a copy of what the log told so far.
type eventCounts struct {
	selfCrashes       map[string]int
	stalls            map[string]int
	stripeFaults      map[string]int
	completerFinished int
	fenced            int
	receiptRaces      int
}

func (l *eventLog) counts() eventCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return eventCounts{
		selfCrashes:       maps.Clone(l.selfCrashes),
		stalls:            maps.Clone(l.stalls),
		stripeFaults:      maps.Clone(l.stripeFaults),
		completerFinished: l.completerFinished,
		fenced:            l.fenced,
		receiptRaces:      l.receiptRaces,
	}
}
