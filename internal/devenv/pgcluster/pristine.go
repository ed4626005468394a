package pgcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A cluster fresh from initdb is the same every time for one server build, one set of initdb
// options and one owner, yet making it is most of what starting a throwaway cluster costs:
// initdb took 2 to 5 s on a loaded 2-core machine, where copying its 40 MB took a tenth to a
// half of that, and every test binary of `go test ./...` starts a cluster. So the first initdb
// leaves a copy of its cluster in the user's cache directory, and later clusters start as copies
// of it. A cache entry is complete or absent: it is written elsewhere and renamed into place.

// pristineCachePath returns where the pristine cluster made by initdb with args is kept, or ""
// if there is no cache directory to use.
func (c *Cluster) pristineCachePath(args []string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	// The server build, by its binary's size and time; initdb's options; the owner; and the
	// time zone, which initdb writes into postgresql.conf.
	h := sha256.New()
	fmt.Fprintln(h, c.binDir, strings.Join(args, " "), os.Getenv("TZ"))
	if info, err := os.Stat(filepath.Join(c.binDir, "postgres")); err == nil {
		fmt.Fprintln(h, info.Size(), info.ModTime().UnixNano())
	}
	if c.owner.credential != nil {
		fmt.Fprintln(h, c.owner.credential.Uid, c.owner.credential.Gid)
	}
	return filepath.Join(base, "rocketrides", "postgres", "pristine-"+hex.EncodeToString(h.Sum(nil)[:8]))
}

// savePristine copies the cluster in dataDir to cached, unless another process got there
// first. It is best effort: without it, the next cluster runs initdb again.
func savePristine(dataDir, cached string) {
	parent := filepath.Dir(cached)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return
	}
	tmp, err := os.MkdirTemp(parent, "tmp-")
	if err != nil {
		return
	}
	if copyTree(dataDir, tmp, owner{}) != nil || os.Rename(tmp, cached) != nil {
		_ = os.RemoveAll(tmp)
	}
}

// copyTree copies the directory tree src into the existing directory dst, with each file's
// mode, handing everything to owner.
func copyTree(src, dst string, owner owner) error {
	if _, err := os.Stat(filepath.Join(src, "PG_VERSION")); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
					return err
				}
			}
			if err := os.Chmod(target, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("error copying %s: not a file or a directory", path)
		}
		return owner.chown(target)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return errors.Join(err, out.Close())
	}
	return out.Close()
}

// emptyDir removes everything inside dir, leaving dir itself.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("error emptying %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("error emptying %s: %w", dir, err)
		}
	}
	return nil
}
