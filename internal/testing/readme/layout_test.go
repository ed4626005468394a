package readme

import (
	"os/exec"
	"strings"
	"testing"
)

// shippedCommands are the commands a deployment runs; cmd/dev, cmd/chaos, cmd/bench and the
// Stripe stand-in are for development.
var shippedCommands = []string{"api", "worker", "enqueuer", "completer", "reaper", "migrate", "admin"}

// TestShippedCommandsLinkNoHarness checks the README's layout table: the test harness
// (internal/testing) and the local stack's packages (internal/devenv) are never linked into a
// command that ships.
func TestShippedCommandsLinkNoHarness(t *testing.T) {
	t.Parallel()

	for _, name := range shippedCommands {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("go", "list", "-deps", "./cmd/"+name)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps ./cmd/%s: %v", name, err)
			}
			for _, pkg := range strings.Fields(string(out)) {
				if strings.Contains(pkg, "/internal/testing/") || strings.Contains(pkg, "/internal/devenv/") {
					t.Errorf("cmd/%s links %s, a harness package", name, pkg)
				}
			}
		})
	}
}
