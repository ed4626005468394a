package main

import (
	"io"
	"testing"
)

// TestBaselineFirstNeedsBaseline: -baseline-first reorders the baseline's run, so it means
// nothing alone, and with -baseline it is taken.
func TestBaselineFirstNeedsBaseline(t *testing.T) {
	t.Parallel()
	if _, err := parseOptions([]string{"-compare", "-baseline-first"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("want -baseline-first without -baseline refused")
	}
	opts, err := parseOptions([]string{"-compare", "-baseline", "HEAD", "-baseline-first"}, func(string) string { return "" }, io.Discard)
	if err != nil || !opts.baselineFirst {
		t.Errorf("want -baseline-first taken with -baseline, got %v, %+v", err, opts)
	}
}
