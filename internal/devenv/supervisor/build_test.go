package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSharedBinDirPrunesGoneCheckouts: the directory of built commands of a checkout that was
// deleted goes once another checkout gets its first; a live checkout's directory stays, and so
// does a gone one's whose lock a build holds.
func TestSharedBinDirPrunesGoneCheckouts(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	checkouts := t.TempDir()
	newCheckout := func(name string) (root, binDir string) {
		t.Helper()
		root = filepath.Join(checkouts, name)
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		binDir, err := SharedBinDir(root)
		if err != nil {
			t.Fatal(err)
		}
		return root, binDir
	}
	_, live := newCheckout("live")
	goneRoot, gone := newCheckout("gone")
	busyRoot, busy := newCheckout("busy")
	unlock, err := LockDir(busy)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, root := range []string{goneRoot, busyRoot} {
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := SharedBinDir(filepath.Join(checkouts, "live")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gone); err != nil {
		t.Fatalf("want the gone checkout's directory kept until a new checkout comes: %v", err)
	}
	newCheckout("new")
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("want the directory of the deleted checkout removed, got %v", err)
	}
	for _, dir := range []string{live, busy} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("want %s kept: %v", dir, err)
		}
	}
}
