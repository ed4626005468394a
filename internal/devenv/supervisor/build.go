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
	"path/filepath"
	"syscall"
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
func Build(ctx context.Context, root, binDir string, names ...string) error {
	shared, err := SharedBinDir(root)
	if err != nil {
		return err
	}
	unlock, err := lockDir(shared)
	if err != nil {
		return err
	}
	defer unlock()

	args := []string{"build", "-o", shared + string(os.PathSeparator)}
	for _, name := range names {
		args = append(args, "./cmd/"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("error building commands: %w\n%s", err, out)
	}
	for _, name := range names {
		if err := linkOrCopy(filepath.Join(shared, name), filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("error copying the binary of cmd/%s: %w", name, err)
		}
	}
	return nil
}

// SharedBinDir returns the directory in which Build builds the commands of the module at root,
// creating it if need be: one per checkout, so that two worktrees do not rebuild over each
// other, in the user's cache directory (~/.cache/rocketrides on Linux), or the temporary
// directory if there is none.
func SharedBinDir(root string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(base, "rocketrides", "bin-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("error creating the directory for built commands: %w", err)
	}
	return dir, nil
}

// lockDir takes an exclusive lock on dir, held until unlock is called or the process exits, so
// that processes building into dir at once take turns: two go builds writing one binary could
// leave a caller a half-written file.
func lockDir(dir string) (unlock func(), err error) {
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
