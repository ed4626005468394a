package proctest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// runDirPrefix names the directory of a test binary's own copies of the commands, followed by
// its process id.
const runDirPrefix = "run-"

// runDir returns a directory for this test binary's binaries, beside the shared ones so that
// they are hard links rather than copies. A test binary has no hook to remove it when it exits,
// so each one removes the directories of test binaries that are gone.
func runDir(root string) (string, error) {
	shared, err := supervisor.SharedBinDir(root)
	if err != nil {
		return "", err
	}
	removeDeadRunDirs(shared)
	dir := filepath.Join(shared, runDirPrefix+strconv.Itoa(os.Getpid()))
	// A directory of a dead process whose id we now have holds only stale links, which Build
	// replaces.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("error creating a directory for the test's binaries: %w", err)
	}
	return dir, nil
}

// removeDeadRunDirs removes the run directories in dir whose process has exited.
func removeDeadRunDirs(dir string) {
	entries, _ := os.ReadDir(dir) // nothing to sweep if unreadable
	for _, e := range entries {
		pidText, ok := strings.CutPrefix(e.Name(), runDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name())) // best effort: the next test binary tries again
	}
}

// processAlive reports whether a process with id pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
