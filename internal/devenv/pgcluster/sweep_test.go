package pgcluster

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestRemoveStaleRunDirs(t *testing.T) {
	t.Parallel()

	parent := t.TempDir()
	old := time.Now().Add(-2 * staleRunDirAge)
	makeDir := func(name string, modTime time.Time, lockPID int) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if lockPID != 0 {
			lock := []byte(strconv.Itoa(lockPID) + "\n/some/data/dir\n")
			if err := os.WriteFile(filepath.Join(dir, ".s.PGSQL.5432.lock"), lock, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, modTime, modTime); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	abandoned := makeDir("rrpg1", old, 0)
	recent := makeDir("rrpg2", time.Now(), 0)
	running := makeDir("rrpg3", old, os.Getpid())
	unrelated := makeDir("other", old, 0)

	removeStaleRunDirs(parent, slog.New(slog.DiscardHandler))

	for dir, wantKept := range map[string]bool{abandoned: false, recent: true, running: true, unrelated: true} {
		_, err := os.Stat(dir)
		if kept := err == nil; kept != wantKept {
			t.Errorf("%s kept = %t, want %t", filepath.Base(dir), kept, wantKept)
		}
	}
}
