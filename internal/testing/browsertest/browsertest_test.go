package browsertest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// missingHelperEnv makes the test binary run Chromium's lookup with no browser on PATH.
const missingHelperEnv = "BROWSERTEST_MISSING_HELPER"

// TestChromiumMissing: with no Chromium on PATH, a browser test fails, rather than being
// skipped, and says what to install.
func TestChromiumMissing(t *testing.T) {
	if os.Getenv(missingHelperEnv) == "1" {
		Chromium(t)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChromiumMissing$", "-test.v")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), missingHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if _, failed := err.(*exec.ExitError); !failed || !strings.Contains(string(out), "--- FAIL: TestChromiumMissing") ||
		!strings.Contains(string(out), "apt-get install chromium") {
		t.Fatalf("want the test to fail saying apt-get install chromium, got %v:\n%s", err, out)
	}
}
