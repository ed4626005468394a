package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestProcessChecksFailWhenProcCannotBeRead checks that a /proc that cannot be read fails the
// test, rather than look like a machine where nothing runs: a check of what a test left behind
// that saw nothing would pass whatever was left.
func TestProcessChecksFailWhenProcCannotBeRead(t *testing.T) {
	// Not parallel: it points procRoot elsewhere.
	setProcRoot := func(t *testing.T, dir string) {
		old := procRoot
		procRoot = dir
		t.Cleanup(func() { procRoot = old })
	}

	t.Run("ListingFails", func(t *testing.T) {
		setProcRoot(t, filepath.Join(t.TempDir(), "missing"))
		requireFatal(t, "error listing processes", func(tb testing.TB) { Descendants(tb, 1) })
	})

	t.Run("StatUnreadable", func(t *testing.T) {
		dir := t.TempDir()
		setProcRoot(t, dir)
		// A directory where the stat file should be: reading it fails with EISDIR, even as root.
		if err := os.MkdirAll(filepath.Join(dir, "123", "stat"), 0o755); err != nil {
			t.Fatal(err)
		}
		requireFatal(t, "error reading process 123", func(tb testing.TB) { Descendants(tb, 1) })
		requireFatal(t, "error reading process 123", func(tb testing.TB) { OwnProcess{Pid: 123}.Running(tb) })
		requireFatal(t, "error reading process 123", func(tb testing.TB) { CheckNoneRunning(tb, []OwnProcess{{Pid: 123}}) })
	})

	t.Run("StatGarbled", func(t *testing.T) {
		dir := t.TempDir()
		setProcRoot(t, dir)
		if err := os.MkdirAll(filepath.Join(dir, "123"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "123", "stat"), []byte("123 sleep S 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		requireFatal(t, "cannot read its stat", func(tb testing.TB) { OwnProcess{Pid: 123}.Running(tb) })
	})

	t.Run("GoneIsNotAnError", func(t *testing.T) {
		setProcRoot(t, t.TempDir()) // an empty /proc: no process 123, and no error
		if (OwnProcess{Pid: 123}).Running(t) {
			t.Fatal("want a process that /proc does not show not running")
		}
	})
}

// requireFatal runs fn with a testing.TB that records a fatal failure, and fails t unless fn
// failed fatally with a message containing want.
func requireFatal(t *testing.T, want string, fn func(tb testing.TB)) {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	var wg sync.WaitGroup
	wg.Go(func() { fn(rec) }) // Fatalf ends the goroutine, as it ends a test's
	wg.Wait()
	if !strings.Contains(rec.fatal, want) {
		t.Fatalf("want a fatal failure containing %q, got %q", want, rec.fatal)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the failure and ends the calling goroutine,
// as a test's does, without failing the test that holds it.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
