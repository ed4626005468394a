package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// With -baseline REV, the comparison also runs the API as built from git revision REV of this
// repository, right after the API at each number of clients, on the same api database with the
// same load: the ratios then say what a change saved in CPU and allocations a ride, measured in
// one run on one machine. Releases are written to run side by side during a rolling deploy, so
// an older release works on today's schema; one that needs a migration the database lacks says
// so when it starts.

// baseline is the revision -baseline names, resolved.
type baseline struct {
	root   string // of the git checkout holding the module
	commit string // the full hash
	short  string // the abbreviated hash, as git prints it
}

// target is the baseline's name in the tables.
func (b *baseline) target() string { return "API at " + b.short }

// resolveBaseline resolves rev, a commit, tag or branch of the git checkout holding the module
// at root.
func resolveBaseline(ctx context.Context, root, rev string) (*baseline, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("-baseline %q is not a git revision", rev)
	}
	if out, err := git(ctx, root, "rev-parse", "--is-inside-work-tree"); err != nil || out != "true" {
		return nil, fmt.Errorf("-baseline needs a git checkout, and %s is not one", root)
	}
	commit, err := git(ctx, root, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("-baseline %q is not a commit of the repository at %s", rev, root)
	}
	short, err := git(ctx, root, "rev-parse", "--short", commit)
	if err != nil {
		return nil, err
	}
	return &baseline{root: root, commit: commit, short: short}, nil
}

// build builds cmd/api at the baseline's commit into binDir, with the same helper as today's
// API, from a temporary detached worktree, so that it is the old code with its own go.mod. The
// worktree, whose path say reports, is removed whatever happens, and so is the directory
// supervisor.Build builds that checkout's commands in, which would otherwise stay until a build
// of another checkout found the worktree gone.
func (b *baseline) build(ctx context.Context, binDir string, say func(string, ...any)) (err error) {
	dir, err := os.MkdirTemp("", "rrbaseline")
	if err != nil {
		return fmt.Errorf("error creating a directory for the baseline's worktree: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	say("building cmd/api at %s in a worktree at %s", b.short, dir)
	if _, err := git(ctx, b.root, "worktree", "add", "--detach", dir, b.commit); err != nil {
		return fmt.Errorf("error checking out %s: %w", b.short, err)
	}
	defer func() {
		// Removed even when the run was interrupted, or git would keep listing it.
		_, rmErr := git(context.WithoutCancel(ctx), b.root, "worktree", "remove", "--force", dir)
		err = errors.Join(err, rmErr)
	}()
	defer func() {
		// The binary is linked into binDir, which keeps it.
		shared, sharedErr := supervisor.SharedBinDir(dir)
		if sharedErr == nil {
			sharedErr = os.RemoveAll(shared)
		}
		err = errors.Join(err, sharedErr)
	}()
	if err := supervisor.Build(ctx, dir, binDir, "api"); err != nil {
		return fmt.Errorf("error building cmd/api at %s: %w", b.short, err)
	}
	return nil
}

// git runs git with args in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("error running git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
