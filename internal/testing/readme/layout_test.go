package readme

import (
	"os/exec"
	"strings"
	"testing"
)

// shippedCommands are the commands a deployment runs, the Procfile's and the operator's and
// client's tools; cmd/dev, lab/chaos, lab/bench, lab/testprogress and the Stripe stand-in are
// for development.
var shippedCommands = []string{"api", "worker", "enqueuer", "completer", "reaper", "migrate", "admin", "simulator", "rides"}

// TestShippedCommandsLinkNoHarness checks the README's layout table: the test harness
// (internal/testing), the local stack (internal/devenv) and the lab (lab/) are never linked into
// a command that ships.
func TestShippedCommandsLinkNoHarness(t *testing.T) {
	t.Parallel()

	for _, name := range shippedCommands {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, pkg := range goList(t, "-deps", "./cmd/"+name) {
				if strings.Contains(pkg, "/internal/testing/") || strings.Contains(pkg, "/internal/devenv/") || strings.Contains(pkg, "/lab/") {
					t.Errorf("cmd/%s links %s, a harness package", name, pkg)
				}
			}
		})
	}
}

// module is this repository's module path.
const module = "github.com/rocketrides/rocketrides"

// layers are the layers of the module's packages, from the top: a package imports only from
// layers below its own, or from its own folder. The commands and the lab stand on everything;
// the test harness and the local stack serve them and the tests; the services (which do not
// import each other) drive the phases; phases write models; foundations under internal/ and the
// public client import nothing of the module above them.
var layers = []struct {
	name     string
	prefixes []string
}{
	{"lab", []string{"lab/"}},
	{"commands", []string{"cmd/"}},
	{"test harness and local stack", []string{"internal/testing/", "internal/devenv/"}},
	{"services", []string{"api", "completer", "enqueuer", "reaper", "workers"}},
	{"phases", []string{"phases"}},
	{"models", []string{"models", "migrations"}},
	{"foundations", []string{"internal/", "client"}},
}

// layerOf returns the index in layers of pkg (a path within the module) and the folder that
// groups it: its top folder, or its folder under internal/, cmd/internal/ or lab/.
func layerOf(pkg string) (layer int, folder string) {
	parts := strings.Split(pkg, "/")
	folder = parts[0]
	if (folder == "internal" || folder == "lab") && len(parts) > 1 {
		folder = strings.Join(parts[:2], "/")
	}
	for i, l := range layers {
		for _, prefix := range l.prefixes {
			if pkg == prefix || strings.HasPrefix(pkg, strings.TrimSuffix(prefix, "/")+"/") {
				return i, folder
			}
		}
	}
	return -1, folder
}

// TestImportsRunOneWay: no package imports one from a layer above its own, and no service
// imports another (each stands alone on the phases, the models and the foundations), so that a
// reader can learn the module from the bottom up. Tests' own imports are not held to it.
func TestImportsRunOneWay(t *testing.T) {
	t.Parallel()
	for _, line := range goList(t, "-f", "{{.ImportPath}}:{{join .Imports \",\"}}", "./...") {
		pkg, imports, _ := strings.Cut(strings.TrimPrefix(line, module+"/"), ":")
		from, fromFolder := layerOf(pkg)
		if from < 0 {
			t.Errorf("%s is in no layer: add it to layers", pkg)
			continue
		}
		for _, imp := range strings.Split(imports, ",") {
			imp, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			to, toFolder := layerOf(imp)
			switch {
			case to < from:
				t.Errorf("%s (%s) imports %s, of the layer above it (%s)", pkg, layers[from].name, imp, layers[to].name)
			case to == from && layers[to].name == "services" && toFolder != fromFolder:
				t.Errorf("%s imports %s: a service imports no other", pkg, imp)
			}
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
