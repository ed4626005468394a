package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNotInstalled is returned by Start when no PostgreSQL server binaries can be found, so that a
// caller can tell "install Postgres" apart from a server that failed to start.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (postgres, initdb) not found: " +
	"install them (Debian: apt-get install postgresql)")

// debianBinGlob is where Debian and Ubuntu put the server binaries, one directory per major
// version, off PATH.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns the directory holding both postgres and initdb: binDir if given, else the
// directory of postgres on PATH, else pg_config --bindir, else the newest Debian-style install.
// Start runs the server from there; the client tools of the same version (psql, pgbench) live
// there too, often off PATH, as on Debian.
func FindBinDir(binDir string) (string, error) {
	if binDir != "" {
		if !hasServerBinaries(binDir) {
			return "", fmt.Errorf("no postgres and initdb in %s: %w", binDir, ErrNotInstalled)
		}
		return binDir, nil
	}

	var candidates []string
	if path, err := exec.LookPath("postgres"); err == nil {
		// PATH often holds symlinks (/usr/local/bin/postgres); initdb lives beside the target.
		if resolved, err := filepath.EvalSymlinks(path); err == nil {
			path = resolved
		}
		candidates = append(candidates, filepath.Dir(path))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	candidates = append(candidates, debianBinDirs()...)

	for _, dir := range candidates {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

// debianBinDirs returns the Debian-style binary directories, newest major version first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob(debianBinGlob) // The pattern is valid, so Glob cannot fail.
	major := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return major(b) - major(a) })
	return dirs
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"postgres", "initdb"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
