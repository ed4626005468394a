package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
)

// runBench runs the command in process, with no environment, and returns its exit status and
// output.
func runBench(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, func(string) string { return "" }, &out, &errOut)
	return code, out.String(), errOut.String()
}

// requireOK runs the command and requires exit status 0, returning what it printed.
func requireOK(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runBench(args...)
	if code != exitOK {
		t.Fatalf("want exit %d, got %d:\n%s%s", exitOK, code, stdout, stderr)
	}
	return stdout
}

// figure reads the first number of a row of the printed table.
func figure(t *testing.T, out, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(label) + `\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q row in:\n%s", label, out)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
