// Command testprogress makes a test run talk while it runs. go test prints a package's result
// only once it and every package listed before it have finished, so `go test ./...` can be
// silent for minutes. Fed `go test -json`, which streams, testprogress prints a line for each
// package as soon as it finishes, the output of each test that failed, and, whenever the run
// has been quiet for a while, which tests are still running and for how long:
//
//	go test -race -json ./... | go run ./lab/testprogress
//
// It exits 1 if a package failed or did not build, or if the input held no package result.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// quietFor is how long the run may be silent before testprogress says what is running, naming
// up to maxTestsShown tests of each package, those running longest.
const (
	quietFor      = 20 * time.Second
	maxTestsShown = 3
)

func main() {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	os.Exit(run(os.Stdin, os.Stdout, ticker.C, time.Now))
}

// event is a line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string

	FailedBuild string // on a package's fail: the test binary did not build
}

// pkgState is what is known of a package still running.
type pkgState struct {
	running map[string]time.Time // tests running now, by name, and since when
	output  map[string][]string  // each test's output so far, "" for the package's own
	failed  []string             // tests that failed, in order
}

// progress prints what the events tell.
type progress struct {
	w          io.Writer
	now        func() time.Time
	start      time.Time
	lastPrint  time.Time
	pkgs       map[string]*pkgState
	ok, failed int
}

// run reads events from r until it ends, printing to w, and returns the exit code. tick drives
// the quiet-run reports.
func run(r io.Reader, w io.Writer, tick <-chan time.Time, now func() time.Time) int {
	p := newProgress(w, now)
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(r)
		scanner.Buffer(make([]byte, 64<<10), 16<<20)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return p.finish()
			}
			p.line(line)
		case <-tick:
			p.tick()
		}
	}
}

func newProgress(w io.Writer, now func() time.Time) *progress {
	return &progress{w: w, now: now, start: now(), lastPrint: now(), pkgs: map[string]*pkgState{}}
}

// tick says what is running if the run has been quiet for quietFor.
func (p *progress) tick() {
	if p.now().Sub(p.lastPrint) >= quietFor {
		p.reportRunning()
	}
}

func (p *progress) printf(format string, args ...any) {
	fmt.Fprintf(p.w, format, args...)
	p.lastPrint = p.now()
}

func (p *progress) line(line string) {
	var e event
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.Action == "" {
		p.printf("%s\n", line) // not an event: go test's own complaint, say
		return
	}
	switch e.Action {
	case "build-output": // the compiler's errors, before the package's fail event
		p.printf("%s", e.Output)
		return
	case "build-fail":
		return
	}
	s := p.pkgs[e.Package]
	if s == nil {
		s = &pkgState{running: map[string]time.Time{}, output: map[string][]string{}}
		p.pkgs[e.Package] = s
	}
	switch e.Action {
	case "run", "cont":
		s.running[e.Test] = p.now()
	case "pause":
		delete(s.running, e.Test)
	case "output":
		s.output[e.Test] = append(s.output[e.Test], e.Output)
	case "fail":
		if e.Test != "" {
			s.failed = append(s.failed, e.Test)
		}
	}
	if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
		return
	}
	if e.Test != "" {
		delete(s.running, e.Test)
		if e.Action != "fail" {
			delete(s.output, e.Test) // only failures are shown
		}
		return
	}
	p.packageDone(e, s)
}

// packageDone prints a package's result, with the output of what failed.
func (p *progress) packageDone(e event, s *pkgState) {
	delete(p.pkgs, e.Package)
	switch e.Action {
	case "skip":
		return // no test files: nothing to say
	case "pass":
		p.ok++
		p.printf("ok    %-58s %6.1fs\n", e.Package, e.Elapsed)
		return
	}
	p.failed++
	if e.FailedBuild != "" {
		p.printf("FAIL  %-58s [build failed]\n", e.Package)
		return
	}
	p.printf("FAIL  %-58s %6.1fs\n", e.Package, e.Elapsed)
	for _, test := range s.failed {
		for _, out := range s.output[test] {
			p.printf("      %s", out)
		}
	}
	if len(s.failed) == 0 { // a panic, a timeout, a failing TestMain: the package's own words
		for _, out := range s.output[""] {
			p.printf("      %s", out)
		}
	}
}

// reportRunning says which packages and tests are still running, the longest first.
func (p *progress) reportRunning() {
	now := p.now()
	var parts []string
	for _, pkg := range slices.Sorted(maps.Keys(p.pkgs)) {
		tests := p.pkgs[pkg].running
		names := slices.SortedFunc(maps.Keys(tests), func(a, b string) int { return tests[a].Compare(tests[b]) })
		var running []string
		for _, name := range names {
			// A test whose subtests run shows as they do.
			if slices.ContainsFunc(names, func(other string) bool { return strings.HasPrefix(other, name+"/") }) {
				continue
			}
			running = append(running, fmt.Sprintf("%s %.0fs", name, now.Sub(tests[name]).Seconds()))
		}
		if len(running) > maxTestsShown {
			running = append(running[:maxTestsShown], fmt.Sprintf("%d more", len(running)-maxTestsShown))
		}
		if len(running) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", pkg, strings.Join(running, ", ")))
		}
	}
	if len(parts) == 0 {
		parts = []string{"building"}
	}
	p.printf("..    %s in: %s\n", now.Sub(p.start).Round(time.Second), strings.Join(parts, "; "))
}

// finish prints the totals and returns the exit code.
func (p *progress) finish() int {
	p.printf("%d packages ok, %d failed, in %s\n", p.ok, p.failed, p.now().Sub(p.start).Round(time.Second))
	if p.failed > 0 || p.ok == 0 {
		return 1
	}
	return 0
}
