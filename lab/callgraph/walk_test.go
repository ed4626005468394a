package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// tinyModule is a module small enough to count by hand. a and b are kept, lib is not:
//
//   - a.Root calls b.Helper, lib.Do with a closure that calls b.Leaf (reached though lib is
//     not walked), a closure stored by the package's initialisation (hook), and apply, passing
//     it double as a value.
//   - lib.Each calls a.Greeter.Hello back through an interface: not counted, as the walk
//     stops at lib.
//   - apply may also call triple, as VTA says, but only a.Unreached passes triple: left out.
var tinyModule = map[string]string{
	"go.mod": "module example.com/m\n\ngo 1.26.0\n",
	"a/a.go": `package a

import (
	"example.com/m/b"
	"example.com/m/lib"
)

// Root is where the walk starts.
// Its doc comment has two lines.
func Root() int {
	b.Helper()
	lib.Each(Greeter{})
	lib.Do(func() {
		b.Leaf()
	})
	return apply(double) + hook()
}

func apply(f func(int) int) int {
	return f(1)
}

func double(n int) int { return 2 * n }

func triple(n int) int {
	return 3 * n
}

// Unreached is off the path.
func Unreached() int {
	return apply(triple)
}

// Greeter is met only by lib.
type Greeter struct{}

// Hello is called only by lib, through an interface.
func (Greeter) Hello() string {
	return "hello"
}

var hook = func() int {
	return 4
}
`,
	"b/b.go": `package b

// Helper is called by a.Root.
func Helper() {
	x := 1
	_ = x
}

// Leaf is called from a.Root's closure.
func Leaf() {}
`,
	"lib/lib.go": `package lib

// Greeter says hello.
type Greeter interface{ Hello() string }

// Each greets g.
func Each(g Greeter) string { return g.Hello() }

// Do calls f.
func Do(f func()) { f() }
`,
	"README.md": `# m

### Reading order

| # | File | What |
| --- | --- | --- |
| 1 | [` + "`a/a.go`" + `](a/a.go) | the root |

## Skip on a first read

- ` + "`b.Leaf`" + `: empty.
`,
}

// writeModule writes files into a new directory and returns it.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runJSON runs the command with args and -json and returns its report and exit status.
func runJSON(t *testing.T, args ...string) (*report, int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append(args, "-json"), &stdout, &stderr)
	var rep report
	if code != 2 {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("error decoding the report: %v\n%s", err, stdout.String())
		}
	}
	return &rep, code, stderr.String()
}

func TestTinyModule(t *testing.T) {
	t.Parallel()
	dir := writeModule(t, tinyModule)
	// From a folder inside the module, which the command walks up from.
	rep, code, stderr := runJSON(t, "-dir", filepath.Join(dir, "b"), "-roots", "a.Root", "-keep", "a,b")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}

	type counted struct {
		name      string
		file      string
		bodyLines int
		docLines  int
	}
	want := []counted{
		{"a.Root", "a/a.go", 6, 2},   // lines 11-16, its closure's among them
		{"a.apply", "a/a.go", 1, 0},  // line 21
		{"a.double", "a/a.go", 1, 0}, // written on one line
		{"a.init$1", "a/a.go", 1, 0}, // hook, line 43
		{"b.Helper", "b/b.go", 2, 1}, // lines 5-6
		{"b.Leaf", "b/b.go", 0, 1},   // an empty body
	}
	var got []counted
	for _, f := range rep.Files {
		for _, fn := range f.Functions {
			got = append(got, counted{fn.Name, fn.File, fn.BodyLines, fn.DocLines})
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("counted\n%v\nwant\n%v", got, want)
	}
	if want := (totals{Functions: 6, Files: 2, BodyLines: 11, DocLines: 4}); rep.Totals != want {
		t.Errorf("totals %+v, want %+v", rep.Totals, want)
	}
	if want := []string{"a.triple"}; !slices.Equal(rep.LeftOut, want) {
		t.Errorf("left out %v, want %v", rep.LeftOut, want)
	}

	// The same as a person reads it.
	var text, textErr bytes.Buffer
	if code := run([]string{"-dir", dir, "-roots", "a.Root", "-keep", "a,b"}, &text, &textErr); code != 0 {
		t.Fatalf("exit status %d: %s", code, textErr.String())
	}
	for _, line := range []string{
		"6 functions in 2 files: 11 body lines, 4 doc comment lines",
		"a/a.go          4           9  reading order #1",
		"b/b.go          2           2  not in the reading order; 1 of 2 functions skipped",
		"Called through function values that only code off the path makes, not counted (1):\n  a.triple\n",
		"Files not covered (1):\n  b/b.go\n",
		"Functions not covered (1):\n  b.Helper\n",
	} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("the report says no %q:\n%s", line, text.String())
		}
	}

	why, code, stderr := runJSON(t, "-dir", dir, "-roots", "a.Root", "-keep", "a,b", "-why", "b.Leaf")
	if want := [][]string{{"a.Root", "a.Root$1", "b.Leaf"}}; code != 0 || !slices.EqualFunc(why.Why, want, slices.Equal) {
		t.Errorf("-why b.Leaf: %v (exit status %d: %s), want %v", why.Why, code, stderr, want)
	}

	// The README puts a/a.go in the reading order and skips b.Leaf, so b.Helper alone is not
	// covered, and b/b.go is the file it leaves uncovered.
	if len(rep.Files) != 2 || rep.Files[0].Place != 1 || rep.Files[1].Place != 0 || rep.Files[1].Skipped {
		t.Errorf("files' coverage: %+v", rep.Files)
	}
	if want := []string{"b.Helper"}; !slices.Equal(rep.UncoveredFunctions, want) {
		t.Errorf("functions not covered %v, want %v", rep.UncoveredFunctions, want)
	}
	if want := []string{"b/b.go"}; !slices.Equal(rep.UncoveredFiles, want) {
		t.Errorf("files not covered %v, want %v", rep.UncoveredFiles, want)
	}
}

// TestLimits: each limit exits 1 and says which it is once broken, and only then.
func TestLimits(t *testing.T) {
	t.Parallel()
	dir := writeModule(t, tinyModule)
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"WithinLimits", []string{"-max-files", "2", "-max-lines", "11"}, 0, ""},
		{"TooManyFiles", []string{"-max-files", "1"}, 1, "the path spans 2 files, more than -max-files 1"},
		{"TooManyLines", []string{"-max-lines", "10"}, 1, "the path has 11 body lines, more than -max-lines 10"},
		{"NotCovered", []string{"-require-covered"}, 1, "1 reached functions are neither in the README's reading order nor skipped: b.Helper"},
		{"MissingRoot", []string{"-roots", "a.Root,a.(*Greeter).Bye"}, 2, `root "a.(*Greeter).Bye": type Greeter has no method Bye`},
		{"MissingPackage", []string{"-roots", "c.Root"}, 2, `root "c.Root": no package c in the module`},
		{"RootNotKept", []string{"-roots", "lib.Do"}, 2, `root "lib.Do": not in a kept package (-keep)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-dir", dir, "-roots", "a.Root", "-keep", "a,b"}, tt.args...)
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr: %s", code, tt.wantCode, stderr.String())
			}
			if tt.wantErr == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantErr)
			}
		})
	}
}

// realModule is this module's report with the default roots and packages, made once.
var realModule = sync.OnceValues(func() (*report, error) {
	return analyse(options{dir: ".", roots: defaultRoots, kept: defaultKept})
})

// TestRealModule: the ride's three roots are on the path, which spans more than a handful of
// files, all in the kept packages, and the README's reading order is found. Today's figures
// are logged, not asserted: they move whenever the code does.
func TestRealModule(t *testing.T) {
	t.Parallel()
	rep, err := realModule()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d functions in %d files: %d body lines, %d doc comment lines",
		rep.Totals.Functions, rep.Totals.Files, rep.Totals.BodyLines, rep.Totals.DocLines)

	names := map[string]bool{}
	for _, f := range rep.Files {
		if !slices.Contains(defaultKept, filepath.Dir(f.Path)) {
			t.Errorf("%s is in no kept package", f.Path)
		}
		for _, fn := range f.Functions {
			names[fn.Name] = true
		}
	}
	for _, root := range defaultRoots {
		if !names[root] {
			t.Errorf("root %s is not on the path", root)
		}
	}
	if rep.Totals.Files <= 5 {
		t.Errorf("the path spans %d files; a ride runs through more than 5", rep.Totals.Files)
	}
	// Each row of the reading order names a file that exists.
	if len(rep.ReadingOrder) < 5 {
		t.Errorf("the README's reading order has %d files: %v", len(rep.ReadingOrder), rep.ReadingOrder)
	}
	root, err := moduleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.ReadingOrder {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the reading order names %s: %v", f, err)
		}
	}
	t.Logf("the reading order's %d files: %v", len(rep.ReadingOrder), rep.ReadingOrder)
}
