package readme

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// shippedCommands are the commands a deployment runs, the Procfile's and the operator's and
// client's tools; cmd/dev, cmd/chaos, cmd/bench, cmd/testprogress and the Stripe stand-in are
// for development.
var shippedCommands = []string{"api", "worker", "enqueuer", "completer", "reaper", "migrate", "admin", "simulator", "rides"}

// TestShippedCommandsLinkNoHarness checks the README's layout table: the test harness
// (internal/testing) and the local stack's packages (internal/devenv) are never linked into a
// command that ships.
func TestShippedCommandsLinkNoHarness(t *testing.T) {
	t.Parallel()

	for _, name := range shippedCommands {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, pkg := range goList(t, "-deps", "./cmd/"+name) {
				if strings.Contains(pkg, "/internal/testing/") || strings.Contains(pkg, "/internal/devenv/") {
					t.Errorf("cmd/%s links %s, a harness package", name, pkg)
				}
			}
		})
	}
}

// module is this repository's module path.
const module = "github.com/rocketrides/rocketrides"

// TestLeafPackages checks the two packages that phases imports from beside api and workers,
// which the README's layout table calls leaves: each shares one shape between packages that
// must not import each other, so it may import nothing of this module but models.
func TestLeafPackages(t *testing.T) {
	t.Parallel()

	for pkg, allowed := range map[string][]string{
		"api/resource":    {module + "/models"},
		"workers/jobargs": {"github.com/riverqueue/river"},
	} {
		for _, imp := range goList(t, "-f", "{{join .Imports \"\\n\"}}", "./"+pkg) {
			if !strings.Contains(imp, ".") { // the standard library
				continue
			}
			if !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s: a leaf imports only %v and the standard library", pkg, imp, allowed)
			}
		}
	}
	// And phases itself stays below api and workers: it imports their leaves, never them.
	for _, imp := range goList(t, "-f", "{{join .Imports \"\\n\"}}", "./phases") {
		if imp == module+"/api" || imp == module+"/workers" || imp == "net/http" || strings.HasPrefix(imp, "github.com/go-chi/") {
			t.Errorf("phases imports %s", imp)
		}
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}
