package pgcluster

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestPristineCache: the first cluster runs initdb and keeps a copy of what it made; the next
// starts from that copy, and is a working cluster of its own.
func TestPristineCache(t *testing.T) {
	// Not parallel: t.Setenv gives this test a cache directory of its own.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir()) // where macOS keeps its cache directory

	start := func() (*Cluster, string) {
		var log proctest.SyncBuffer
		cluster := startCluster(t, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		return cluster, log.String()
	}
	_, firstLog := start()
	if !strings.Contains(firstLog, "Postgres: initialised cluster") {
		t.Fatalf("want the first cluster made by initdb, got:\n%s", firstLog)
	}
	second, secondLog := start()
	if !strings.Contains(secondLog, "Postgres: copied a pristine cluster") {
		t.Fatalf("want the second cluster copied from the first's, got:\n%s", secondLog)
	}

	conn := connect(t, second.URL("postgres"))
	for _, sql := range []string{"CREATE DATABASE copied", "CREATE TABLE t (n int)", "INSERT INTO t VALUES (1)"} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("want the copied cluster working, %s failed: %v", sql, err)
		}
	}
	info, err := os.Stat(second.DataDir())
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("want the data directory private to its owner, as Postgres requires: %v, %v", info, err)
	}
	// What the second cluster wrote is its own: the cache stays as initdb left it.
	cached, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "rocketrides", "postgres", "pristine-*"))
	if len(cached) != 1 {
		t.Fatalf("want one cached cluster, got %v", cached)
	}
	if pid, err := os.ReadFile(filepath.Join(cached[0], "postmaster.pid")); err == nil {
		t.Fatalf("want no server ever started on the cached cluster, found its pid file: %s", bytes.TrimSpace(pid))
	}
}
