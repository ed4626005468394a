package main

import (
	"slices"
	"testing"
)

// The reading path's bounds (issue 31): a ride runs through at most maxPathFiles files, every
// one of them in the README's reading order (at most maxReadingOrder files) or in its section on
// what to skip on a first read, and through at most maxPathBodyLines lines of function bodies.
// maxPathBodyLines is what the path measured when it was set, a ratchet: the goal is
// 1,700. docs/reading-path.md gives the figures measured before and after.
const (
	maxPathFiles     = 28
	maxReadingOrder  = 12
	maxPathBodyLines = 1811
)

// maxCancelOnlyFiles bounds how many files the cancel's path has that the booking's has not:
// the two requests share their machinery, so the cancel adds little more than its own phases.
const maxCancelOnlyFiles = 3

// cancelRoots are the cancel's ways in, as defaultRoots are the booking's.
var cancelRoots = []string{
	"api.(*Server).handleCancelRide",
	"enqueuer.(*Enqueuer).runOnce",
	"workers.(*SendRefundReceiptWorker).Work",
}

// TestReadingPathFitsASitting holds the ride's path to its bounds and to the README: a reader
// who reads the ordered files meets no call whose body they have not read or been told to skip.
func TestReadingPathFitsASitting(t *testing.T) {
	t.Parallel()
	rep, err := realModule()
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Totals.Files; n > maxPathFiles {
		t.Errorf("a ride's path spans %d files; at most %d", n, maxPathFiles)
	}
	if n := rep.Totals.BodyLines; n > maxPathBodyLines {
		t.Errorf("a ride's path runs %d lines of function bodies; at most %d", n, maxPathBodyLines)
	}
	if n := len(rep.ReadingOrder); n > maxReadingOrder {
		t.Errorf("the README's reading order has %d files; at most %d", n, maxReadingOrder)
	}
	if !rep.SkipSection {
		t.Error("the README has no section on what to skip on a first read")
	}
	if len(rep.UncoveredFiles) > 0 || len(rep.UncoveredFunctions) > 0 {
		t.Errorf("the README neither orders nor skips these files %v and functions %v of the ride's path",
			rep.UncoveredFiles, rep.UncoveredFunctions)
	}
}

// TestCancelPathMirrorsTheBooking: the cancel runs through the booking's files but for a few of
// its own.
func TestCancelPathMirrorsTheBooking(t *testing.T) {
	t.Parallel()
	booking, err := realModule()
	if err != nil {
		t.Fatal(err)
	}
	cancel, err := analyse(options{dir: ".", roots: cancelRoots, kept: defaultKept})
	if err != nil {
		t.Fatal(err)
	}
	var bookingFiles []string
	for _, f := range booking.Files {
		bookingFiles = append(bookingFiles, f.Path)
	}
	var own []string
	for _, f := range cancel.Files {
		if !slices.Contains(bookingFiles, f.Path) {
			own = append(own, f.Path)
		}
	}
	t.Logf("the cancel's path: %d files, %d body lines; its own files: %v", cancel.Totals.Files, cancel.Totals.BodyLines, own)
	if len(own) > maxCancelOnlyFiles {
		t.Errorf("the cancel's path has %d files the booking's has not, at most %d: %v", len(own), maxCancelOnlyFiles, own)
	}
}
