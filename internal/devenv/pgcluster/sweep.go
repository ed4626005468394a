package pgcluster

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// staleRunDirAge is how long a run directory must have been left alone, with no server running
// on it, before Start removes it. Such directories are left by processes killed before their
// cleanup, such as a test binary that panicked or timed out, and each one holds a temporary
// cluster of tens of megabytes. The hour leaves any live user (a test that stopped its server
// for a while, an initdb in progress) far outside the window.
const staleRunDirAge = time.Hour

// runDirPattern names run directories, for os.MkdirTemp and for the sweep.
const runDirPattern = "rrpg"

// removeStaleRunDirs removes the run directories in parent that no live server uses.
func removeStaleRunDirs(parent string, logger *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(parent, runDirPattern+"*")) // Valid pattern: no error.
	for _, dir := range dirs {
		info, err := os.Lstat(dir)
		if err != nil || !info.IsDir() || time.Since(info.ModTime()) < staleRunDirAge || serverAlive(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			logger.Warn("Postgres: error removing stale directory", slog.String("dir", dir), slog.String("error", err.Error()))
			continue
		}
		logger.Info("Postgres: removed stale directory", slog.String("dir", dir))
	}
}

// serverAlive reports whether a server still uses dir as its socket directory: the socket's lock
// file names its process, which Postgres keeps and touches for as long as it runs.
func serverAlive(dir string) bool {
	locks, _ := filepath.Glob(filepath.Join(dir, ".s.PGSQL.*.lock"))
	for _, lock := range locks {
		content, err := os.ReadFile(lock)
		if err != nil {
			return true // Unreadable: assume the worst, keep the directory.
		}
		firstLine, _, _ := strings.Cut(string(content), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(firstLine))
		if err != nil || pid <= 0 {
			return true
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			return true
		}
	}
	return false
}
