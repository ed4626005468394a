package main

import (
	"fmt"
	"go/types"
	"io"
	"slices"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// report is what the command prints, and, with -json, its JSON.
type report struct {
	Roots  []string `json:"roots"`
	Kept   []string `json:"kept_packages"`
	Totals totals   `json:"totals"`
	Files  []*file  `json:"files"`

	// ReadingOrder is the README's reading order; SkipSection whether the README has a section
	// on what to skip on a first read.
	ReadingOrder []string `json:"reading_order"`
	SkipSection  bool     `json:"skip_section"`

	// UncoveredFiles and UncoveredFunctions are those reached that the README neither puts in
	// the reading order nor says to skip.
	UncoveredFiles     []string `json:"uncovered_files"`
	UncoveredFunctions []string `json:"uncovered_functions"`

	// LeftOut are functions that the call graph says a reached function may call through a
	// function value, but whose value only kept functions off the path make; not counted.
	LeftOut []string `json:"left_out_closures"`

	// Why is the path from a root to each function that -why names, the root first.
	Why [][]string `json:"why,omitempty"`

	// Failures says which limit of -max-files, -max-lines or -require-covered was broken.
	Failures []string `json:"failures"`
}

// totals sums the reading path.
type totals struct {
	Functions int `json:"functions"`
	Files     int `json:"files"`
	BodyLines int `json:"body_lines"`
	DocLines  int `json:"doc_lines"`
}

// file is one file of the reading path.
type file struct {
	Path      string      `json:"path"`
	Functions []*function `json:"functions"`
	BodyLines int         `json:"body_lines"` // lines of the reached bodies, each counted once
	DocLines  int         `json:"doc_lines"`
	// Place is the file's row in the reading order (from 1), or 0; Skipped says the README
	// says to skip the whole file.
	Place   int  `json:"reading_order_place"`
	Skipped bool `json:"skipped"`
}

// status says in words how the README covers f.
func (f *file) status(r *report) string {
	switch {
	case f.Place > 0:
		return fmt.Sprintf("reading order #%d", f.Place)
	case f.Skipped:
		return "skipped on a first read"
	}
	uncovered := 0
	for _, fn := range f.Functions {
		for _, u := range r.UncoveredFunctions {
			if fn.Name == u {
				uncovered++
			}
		}
	}
	if uncovered < len(f.Functions) {
		return fmt.Sprintf("not in the reading order; %d of %d functions skipped", len(f.Functions)-uncovered, len(f.Functions))
	}
	return "not in the reading order"
}

// report walks from opts.roots and measures what it reached against what rd says.
func (p *program) report(opts options, rd readme) (*report, error) {
	var roots []*ssa.Function
	for _, name := range opts.roots {
		fn, err := p.resolveRoot(name)
		if err != nil {
			return nil, err
		}
		roots = append(roots, fn)
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("no roots given")
	}
	kept := map[string]bool{}
	for _, k := range opts.kept {
		if p.prog.ImportedPackage(k) == nil {
			k = p.module + "/" + k
		}
		if p.prog.ImportedPackage(k) == nil {
			return nil, fmt.Errorf("kept package %s: no such package in the module", k)
		}
		kept[k] = true
	}
	for i, fn := range roots {
		if !kept[topOf(fn).Pkg.Pkg.Path()] {
			return nil, fmt.Errorf("root %q: not in a kept package (-keep)", opts.roots[i])
		}
	}

	rep := &report{
		Roots:        opts.roots,
		Kept:         opts.kept,
		ReadingOrder: rd.readingOrder,
		SkipSection:  rd.hasSkipSection,
		// Empty lists, not null, for a JSON reader.
		Files:              []*file{},
		UncoveredFiles:     []string{},
		UncoveredFunctions: []string{},
		LeftOut:            []string{},
		Failures:           []string{},
	}
	if rep.ReadingOrder == nil {
		rep.ReadingOrder = []string{}
	}
	byPath := map[string]*file{}
	lines := map[string]map[int]bool{}
	w := p.walk(roots, kept)
	for _, fn := range w.leftOut {
		rep.LeftOut = append(rep.LeftOut, p.instanceName(fn))
	}
	slices.Sort(rep.LeftOut)
	if opts.why != "" {
		if rep.Why = p.why(w, opts.why); len(rep.Why) == 0 {
			return nil, fmt.Errorf("-why %s: no such function on the path", opts.why)
		}
	}
	for _, fn := range p.count(w.reached) {
		f := byPath[fn.File]
		if f == nil {
			f = &file{Path: fn.File}
			f.Place, f.Skipped = rd.fileCoverage(fn.File)
			byPath[fn.File] = f
			lines[fn.File] = map[int]bool{}
			rep.Files = append(rep.Files, f)
		}
		f.Functions = append(f.Functions, fn)
		for _, l := range fn.lines {
			lines[fn.File][l] = true
		}
		f.DocLines += fn.DocLines
		if f.Place == 0 && !f.Skipped && !rd.funcSkipped(fn.Name) {
			rep.UncoveredFunctions = append(rep.UncoveredFunctions, fn.Name)
		}
	}
	for _, f := range rep.Files {
		f.BodyLines = len(lines[f.Path])
		rep.Totals.Functions += len(f.Functions)
		rep.Totals.BodyLines += f.BodyLines
		rep.Totals.DocLines += f.DocLines
		if f.Place == 0 && !f.Skipped {
			for _, fn := range f.Functions {
				if !rd.funcSkipped(fn.Name) {
					rep.UncoveredFiles = append(rep.UncoveredFiles, f.Path)
					break
				}
			}
		}
	}
	rep.Totals.Files = len(rep.Files)

	if opts.maxFiles > 0 && rep.Totals.Files > opts.maxFiles {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the path spans %d files, more than -max-files %d", rep.Totals.Files, opts.maxFiles))
	}
	if opts.maxLines > 0 && rep.Totals.BodyLines > opts.maxLines {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the path has %d body lines, more than -max-lines %d", rep.Totals.BodyLines, opts.maxLines))
	}
	if opts.requireCovered && len(rep.UncoveredFunctions) > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d reached functions are neither in the README's reading order nor skipped: %s",
			len(rep.UncoveredFunctions), strings.Join(rep.UncoveredFunctions, ", ")))
	}
	return rep, nil
}

// instanceName is fn's name followed by the type arguments of the generic function it is an
// instance of, if it is one, so that two instances can be told apart.
func (p *program) instanceName(fn *ssa.Function) string {
	top := fn
	for top.Parent() != nil {
		top = top.Parent()
	}
	var targs []string
	for _, t := range top.TypeArgs() {
		targs = append(targs, types.TypeString(t, (*types.Package).Name))
	}
	if len(targs) == 0 {
		return p.name(fn)
	}
	return p.name(fn) + " [" + strings.Join(targs, ", ") + "]"
}

// why returns the path from a root to each reached function called name, the root first.
func (p *program) why(w walked, name string) [][]string {
	var paths [][]string
	for _, fn := range w.reached {
		if nameKey(p.name(fn)) != nameKey(name) {
			continue
		}
		var path []string
		for f := fn; f != nil; f = w.via[f] {
			path = append([]string{p.name(f)}, path...)
		}
		paths = append(paths, path)
	}
	return paths
}

// print writes the report for a person.
func (r *report) print(w io.Writer) {
	for _, path := range r.Why {
		fmt.Fprintf(w, "Why: %s\n", strings.Join(path, "\n  -> "))
	}
	if len(r.Why) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Reading path from %s\n", strings.Join(r.Roots, ", "))
	fmt.Fprintf(w, "through %s\n\n", strings.Join(r.Kept, ", "))
	fmt.Fprintf(w, "%d functions in %d files: %d body lines, %d doc comment lines\n\n",
		r.Totals.Functions, r.Totals.Files, r.Totals.BodyLines, r.Totals.DocLines)

	width := len("file")
	for _, f := range r.Files {
		width = max(width, len(f.Path))
	}
	fmt.Fprintf(w, "%-*s  %9s  %10s  %s\n", width, "file", "functions", "body lines", "README")
	for _, f := range r.Files {
		fmt.Fprintf(w, "%-*s  %9d  %10d  %s\n", width, f.Path, len(f.Functions), f.BodyLines, f.status(r))
	}
	if !r.SkipSection {
		fmt.Fprintf(w, "\nThe README has no section on what to skip on a first read.\n")
	}
	if len(r.LeftOut) > 0 {
		fmt.Fprintf(w, "\nCalled through function values that only code off the path makes, not counted (%d):\n", len(r.LeftOut))
		for _, c := range r.LeftOut {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	fmt.Fprintf(w, "\nFiles not covered (%d):\n", len(r.UncoveredFiles))
	for _, f := range r.UncoveredFiles {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintf(w, "\nFunctions not covered (%d):\n", len(r.UncoveredFunctions))
	for _, f := range r.UncoveredFunctions {
		fmt.Fprintf(w, "  %s\n", f)
	}
}
