// Package browsertest runs Debian's headless Chromium for tests that drive a real browser
// through chromedp: it finds the browser, starts one of its own for a test, and closes it, and
// every process it started, when the test ends.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumName is Debian's Chromium (apt-get install chromium), which .ci/run installs.
const chromiumName = "chromium"

// startTimeout bounds the browser's start, tens of seconds on a loaded machine at most.
const startTimeout = 60 * time.Second

// Chromium returns the path of Chromium, or fails the test saying how to install it: a browser
// test that is skipped proves nothing.
func Chromium(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath(chromiumName)
	if err != nil {
		t.Fatalf("%s is not on PATH: the browser tests need Debian's headless Chromium (apt-get install chromium; .ci/run installs it)", chromiumName)
	}
	return path
}

// AllocatorOptions are the options of a headless Chromium of the test's own: a fresh profile
// in a temporary directory, and no sandbox when the test runs as root, which Chromium refuses
// to sandbox.
func AllocatorOptions(t testing.TB) []chromedp.ExecAllocatorOption {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.WSURLReadTimeout(startTimeout),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	return opts
}

// Browser is a headless Chromium of one test's own.
type Browser struct {
	// Ctx is the browser's first tab, for chromedp.Run.
	Ctx context.Context

	mu  sync.Mutex
	out strings.Builder
}

// Output is what the browser wrote to stdout and stderr, for a failing test's log.
func (b *Browser) Output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

func (b *Browser) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

// Start starts a headless Chromium with AllocatorOptions and opts, and opens its first tab. The
// browser is closed, and waited for, when the test ends.
func Start(t testing.TB, opts ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	b := &Browser{}
	opts = append(AllocatorOptions(t), append(opts, chromedp.CombinedOutput(b))...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills the browser and waits for it
		if t.Failed() {
			t.Logf("output of %s:\n%s", chromiumName, b.Output())
		}
	})
	// The first Run starts the browser: tied to ctx, which the test's end cancels.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("error starting %s: %v\n%s", chromiumName, err, b.Output())
	}
	b.Ctx = ctx
	return b
}
