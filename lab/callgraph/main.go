// Command callgraph measures the reading path of one new ride: the functions of the lesson's
// packages that a ride may run, from the POST /rides handler to the receipt's worker, found on
// golang.org/x/tools' VTA call graph, and how the README's reading order covers them.
//
//	go run ./lab/callgraph                    # the report
//	go run ./lab/callgraph -json              # the same, as JSON
//	go run ./lab/callgraph -require-covered   # exit 1 unless the README covers every function
//
// The walk starts at the roots (-roots; defaultRoots are today's) and goes on through the kept
// packages only (-keep): from a function of a kept package to every function the call graph
// says it may call and every function it refers to as a value (a closure, a method value, a
// function passed along), passing through synthetic wrappers. It stops at any other package:
// the standard library, River or pgx may call back into the module through an interface (fmt a
// String method, encoding/json a MarshalJSON), and VTA, which does not tell one call of fmt from
// another, would then credit a ride with every such method the module has. A callback that kept
// code hands to a library (a pgx.BeginFunc closure, a handler method value) is still reached,
// as a value that kept code refers to.
//
// For the same reason a call through a function value enters its callee only if some function
// that makes that value (creates the closure, takes the function as a value) is reached, or
// runs before any ride: a package's initialisation, or code outside the kept packages (a
// command's wiring). VTA gives a function-typed parameter every value any caller passes, so the
// ride's writeAnswer would otherwise call the cancel's outcome function, and runRequest the
// cancel's whole graph. The report lists the functions this leaves out.
//
// Counting: a function is a declared function or method of a kept package, or a closure whose
// enclosing function was not reached; a closure inside a reached function is read with it.
// Package initialisation and synthetic functions (wrappers, with no source) are not counted.
// A function's body lines are the lines between its braces, blank and comment lines included,
// counted once per file however many reached functions' bodies hold them; its doc lines are
// those of its doc comment.
//
// Coverage: a file is covered when the table under the README's "Reading order" heading names
// it, or the section whose heading says to skip on a first read names it (or its folder); a
// function is covered when its file is, or that section names it (`phases.(*Executor).keepLease`).
// -max-files, -max-lines and -require-covered make the command exit 1 when the path is longer
// or less covered than allowed; an error (a root that does not exist) exits 2.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// defaultRoots are where a new ride enters each process: the POST /rides handler, the
// enqueuer's drain of one batch of staged jobs, and the worker that mails the receipt.
// enqueuer's RunOnce wraps runOnce, which does the drain, with logging and metrics.
var defaultRoots = []string{
	"api.(*Server).handleCreateRide",
	"enqueuer.(*Enqueuer).runOnce",
	"workers.(*SendRideReceiptWorker).Work",
}

// defaultKept are the lesson's packages, relative to the module.
var defaultKept = []string{"api", "phases", "models", "enqueuer", "workers", "internal/jobargs"}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	dir            string
	roots          []string
	kept           []string
	json           bool
	maxFiles       int
	maxLines       int
	requireCovered bool
	why            string
}

// run runs the command and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("callgraph", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts options
	roots := flags.String("roots", strings.Join(defaultRoots, ","), "the functions a ride enters by, comma-separated: pkg.Func or pkg.(*Type).Method, pkg relative to the module or in full")
	kept := flags.String("keep", strings.Join(defaultKept, ","), "the packages walked and counted, comma-separated, relative to the module or in full")
	flags.StringVar(&opts.dir, "dir", ".", "a directory in the module")
	flags.BoolVar(&opts.json, "json", false, "print the report as JSON")
	flags.IntVar(&opts.maxFiles, "max-files", 0, "exit 1 if the path spans more files than this (0: no limit)")
	flags.IntVar(&opts.maxLines, "max-lines", 0, "exit 1 if the path has more body lines than this (0: no limit)")
	flags.BoolVar(&opts.requireCovered, "require-covered", false, "exit 1 if a reached file or function is neither in the README's reading order nor skipped")
	flags.StringVar(&opts.why, "why", "", "also print the path from a root to this function (named as in the report)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "callgraph: unexpected arguments %q\n", flags.Args())
		return 2
	}
	opts.roots, opts.kept = splitList(*roots), splitList(*kept)

	rep, err := analyse(opts)
	if err != nil {
		fmt.Fprintf(stderr, "callgraph: %v\n", err)
		return 2
	}
	if opts.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "callgraph: error writing the report: %v\n", err)
			return 2
		}
	} else {
		rep.print(stdout)
	}
	if len(rep.Failures) > 0 {
		for _, f := range rep.Failures {
			fmt.Fprintf(stderr, "callgraph: %s\n", f)
		}
		return 1
	}
	return 0
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// analyse loads the module that holds opts.dir and reports on it.
func analyse(opts options) (*report, error) {
	root, err := moduleRoot(opts.dir)
	if err != nil {
		return nil, err
	}
	prog, err := load(root)
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(prog.root + "/README.md")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("error reading the README: %w", err)
	}
	return prog.report(opts, parseReadme(string(text)))
}
