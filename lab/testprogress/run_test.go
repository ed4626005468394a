package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// events are the lines of `go test -json` for a run of three packages, written as the events
// are: the first passes, the second has a failing test, the third does not build.
const events = `{"Action":"start","Package":"rr/a"}
{"Action":"run","Package":"rr/a","Test":"TestQuick"}
{"Action":"output","Package":"rr/a","Test":"TestQuick","Output":"=== RUN   TestQuick\n"}
{"Action":"pass","Package":"rr/a","Test":"TestQuick","Elapsed":0.1}
{"Action":"pass","Package":"rr/a","Elapsed":1.5}
{"Action":"run","Package":"rr/b","Test":"TestSlow"}
{"Action":"run","Package":"rr/b","Test":"TestSlow/Sub"}
{"Action":"output","Package":"rr/b","Test":"TestSlow/Sub","Output":"    b_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"rr/b","Test":"TestSlow/Sub","Elapsed":30}
{"Action":"fail","Package":"rr/b","Test":"TestSlow","Elapsed":30}
{"Action":"fail","Package":"rr/b","Elapsed":31.2}
{"ImportPath":"rr/c [rr/c.test]","Action":"build-output","Output":"c/c.go:3:1: syntax error\n"}
{"ImportPath":"rr/c [rr/c.test]","Action":"build-fail"}
{"Action":"start","Package":"rr/c"}
{"Action":"fail","Package":"rr/c","Elapsed":0,"FailedBuild":"rr/c [rr/c.test]"}
{"Action":"skip","Package":"rr/d","Output":"?   \trr/d\t[no test files]\n"}
`

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("PrintsEachPackageAndWhatFailed", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		code := run(strings.NewReader(events), &out, nil, time.Now)
		for _, want := range []string{
			"ok    rr/a", "1.5s",
			"FAIL  rr/b", "31.2s", "b_test.go:9: want 1, got 2",
			"c/c.go:3:1: syntax error", "FAIL  rr/c", "[build failed]",
			"1 packages ok, 2 failed",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("want %q in:\n%s", want, out.String())
			}
		}
		if strings.Contains(out.String(), "=== RUN   TestQuick") || strings.Contains(out.String(), "rr/d") {
			t.Errorf("want nothing of passed tests or of packages without tests, got:\n%s", out.String())
		}
		if code != 1 {
			t.Errorf("want exit code 1, got %d", code)
		}
	})

	t.Run("ExitsZeroWhenAllPass", func(t *testing.T) {
		t.Parallel()
		firstPackage := strings.Join(strings.SplitAfter(events, "\n")[:5], "")
		if code := run(strings.NewReader(firstPackage), &bytes.Buffer{}, nil, time.Now); code != 0 {
			t.Errorf("want exit code 0, got %d", code)
		}
		if code := run(strings.NewReader(""), &bytes.Buffer{}, nil, time.Now); code != 1 {
			t.Errorf("want exit code 1 for a run without any package, got %d", code)
		}
	})

	t.Run("SaysWhatRunsWhenQuiet", func(t *testing.T) {
		t.Parallel()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var out bytes.Buffer
		p := newProgress(&out, func() time.Time { return clock })
		p.line(`{"Action":"run","Package":"rr/e","Test":"TestLong"}`)
		p.line(`{"Action":"run","Package":"rr/e","Test":"TestLong/Sub"}`)
		clock = clock.Add(5 * time.Second)
		p.tick() // quiet for 5 s only: nothing to say
		if out.Len() != 0 {
			t.Fatalf("want nothing said after 5 s, got:\n%s", out.String())
		}
		clock = clock.Add(quietFor)
		p.tick()
		want := "..    25s in: rr/e (TestLong/Sub 25s)\n"
		if out.String() != want {
			t.Errorf("want %q, got %q", want, out.String())
		}
		p.tick() // just said it
		if out.String() != want {
			t.Errorf("want the report once, got %q", out.String())
		}
	})
}
