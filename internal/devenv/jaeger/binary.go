package jaeger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/mod/modfile"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// ToolModuleDir is the module, under the repository's root, that pins Jaeger as a Go tool. A
// module of its own keeps Jaeger's hundreds of dependencies out of the service's go.mod, and out
// of its go test ./... and go vet ./....
const ToolModuleDir = "internal/tools/jaeger"

// jaegerPackage is the main package of Jaeger's all-in-one program.
const jaegerPackage = "github.com/jaegertracing/jaeger/cmd/jaeger"

// Binary returns the path of the jaeger program pinned by the tool module of the repository at
// root, building it first if need be. A cold build takes minutes, so the binary is kept in the
// user's cache directory (~/.cache/rocketrides on Linux) under the version and a digest of the
// tool module's go.mod: every checkout and every run on the machine shares one build, and a
// change of the pin builds anew.
func Binary(ctx context.Context, root string) (string, error) {
	moduleDir := filepath.Join(root, ToolModuleDir)
	goMod, err := os.ReadFile(filepath.Join(moduleDir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("error reading Jaeger's tool module: %w", err)
	}
	version, err := pinnedVersion(goMod)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256(goMod)
	dir := filepath.Join(base, "rocketrides", "jaeger-"+version+"-"+hex.EncodeToString(sum[:6]))
	bin := filepath.Join(dir, "jaeger")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("error creating the directory for Jaeger's binary: %w", err)
	}
	// Two callers at once (two test binaries) build it once: the second waits for the first.
	unlock, err := supervisor.LockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// Built beside its final name and renamed, so that a build cut short leaves no binary that
	// a later call would take for a whole one.
	partial := bin + ".partial"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", partial, jaegerPackage)
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("error building Jaeger %s: %w\n%s", version, err, out)
	}
	if err := os.Rename(partial, bin); err != nil {
		return "", fmt.Errorf("error keeping Jaeger's binary: %w", err)
	}
	return bin, nil
}

// pinnedVersion returns the version of Jaeger that the tool module's go.mod requires.
func pinnedVersion(goMod []byte) (string, error) {
	f, err := modfile.ParseLax(ToolModuleDir+"/go.mod", goMod, nil)
	if err != nil {
		return "", fmt.Errorf("error parsing Jaeger's tool module: %w", err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "github.com/jaegertracing/jaeger" {
			return r.Mod.Version, nil
		}
	}
	return "", errors.New("the tool module " + ToolModuleDir + " requires no github.com/jaegertracing/jaeger")
}
