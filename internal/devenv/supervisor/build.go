package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"syscall"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
)

// Build compiles ./cmd/<name> for every name of the module at root, and puts the binaries in
// binDir.
//
// The binaries are built in a directory that every caller on the module shares (see
// SharedBinDir), then linked into binDir. go build relinks a binary only when the one already
// there is out of date (its build ID records the sources and flags it was built from), so a
// command is linked once, not once per caller: `go test ./...` runs a dozen test binaries that
// each start the API, and `go run ./cmd/dev` starts in a second the second time. Each caller
// gets binaries of its own in binDir, so that a rebuild for a later change of the sources never
// swaps a binary under a caller that is running it.
//
// A caller built with the race detector gets commands built with it too (see package race):
// `go test -race ./...` then checks the processes its tests start, where the most concurrent
// code runs. `go run ./cmd/dev` and lab/bench, built without it, build without it.
func Build(ctx context.Context, root, binDir string, names ...string) error {
	pkgs := make([]string, len(names))
	for i, name := range names {
		pkgs[i] = "./cmd/" + name
	}
	return BuildPackages(ctx, root, binDir, pkgs...)
}

// BuildPackages is Build for main packages named by their path from root, such as
// "./cmd/api"; a binary is named by the last element of its path. Tests use it for programs of
// their own, which must be built as the commands are.
func BuildPackages(ctx context.Context, root, binDir string, pkgs ...string) error {
	shared, err := SharedBinDir(root)
	if err != nil {
		return err
	}
	unlock, err := LockDir(shared)
	if err != nil {
		return err
	}
	defer unlock()

	args := []string{"build"}
	if race.Enabled {
		args = append(args, "-race")
	}
	args = append(args, "-o", shared+string(os.PathSeparator))
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("error building commands: %w\n%s", err, out)
	}
	for _, pkg := range pkgs {
		name := path.Base(pkg)
		if err := linkOrCopy(filepath.Join(shared, name), filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("error copying the binary of %s: %w", pkg, err)
		}
	}
	return nil
}

// SharedBinDir returns the directory in which Build builds the commands of the module at root,
// creating it if need be: one per checkout, so that two worktrees do not rebuild over each
// other, in the user's cache directory (~/.cache/rocketrides on Linux), or the temporary
// directory if there is none. Builds with the race detector have a directory of their own
// (suffix raceDirSuffix), so that a `go test -race` run and a `go run ./cmd/dev` take turns
// without relinking every command each time.
func SharedBinDir(root string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(base, "rocketrides", "bin-"+hex.EncodeToString(sum[:8]))
	if race.Enabled {
		dir += raceDirSuffix
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("error creating the directory for built commands: %w", err)
	}
	rootFile := filepath.Join(dir, rootFileName)
	if _, err := os.Stat(rootFile); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(rootFile, []byte(root), 0o644); err != nil {
			return "", fmt.Errorf("error noting the checkout of the directory for built commands: %w", err)
		}
		// A new checkout is when clones come and go (a CI clone, a worktree): the directories of
		// those gone are removed then, each some 300 MB of binaries nobody will run again.
		pruneGoneCheckouts(filepath.Dir(dir))
	}
	return dir, nil
}

// rootFileName, in a directory of built commands, holds the path of the checkout it builds.
const rootFileName = ".root"

// pruneGoneCheckouts removes from base the directories of built commands whose checkout no
// longer exists, but for one in use: a build holds its lock, and a directory whose lock another
// process holds is left alone.
func pruneGoneCheckouts(base string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		root, err := os.ReadFile(filepath.Join(dir, rootFileName))
		if err != nil {
			continue // made before checkouts were noted, or being made
		}
		if _, err := os.Stat(string(root)); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		f.Close()
	}
}

// raceDirSuffix ends the name of a shared directory of commands built with the race detector.
const raceDirSuffix = "-race"

// LockDir takes an exclusive lock on dir, held until unlock is called or the process exits, so
// that processes building into dir at once take turns: two go builds writing one binary could
// leave a caller a half-written file.
func LockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("error opening the build lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("error taking the build lock: %w", err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

// linkOrCopy makes dst the file src is now, by a hard link, or a copy where a link cannot be
// made (another file system). go build replaces a binary by a new file rather than writing over
// it, so dst keeps its content whatever becomes of src.
func linkOrCopy(src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
