// Package stripemock starts Stripe's own stripe-mock for tests. stripe-mock validates requests
// against Stripe's published OpenAPI spec but keeps no state, so it complements
// internal/testing/fakestripe: a contract test sends the charge request Rocket Rides really makes to
// stripe-mock to prove that Stripe would accept its shape, while behaviour (idempotency, declines,
// faults) is tested against the stateful stand-in.
package stripemock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// startTimeout bounds the wait for a started stripe-mock to answer. It loads and indexes the
// whole OpenAPI spec before it listens: a second or two on an idle small machine, and more than
// 30 s on two cores at load 20 (a full test run beside other work), where a 30 s bound failed.
// The bound is there to end a stripe-mock that never comes up, so it can be long.
const startTimeout = 3 * time.Minute

// binary builds stripe-mock once per test process. `go tool -n` builds the tool declared in
// go.mod into the build cache (about 20 s the first time, instant afterwards) and prints its
// path; running that path directly, rather than through `go tool`, leaves no go process between
// the test and stripe-mock to outlive a kill.
var binary = sync.OnceValues(func() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", "tool", "-n", "stripe-mock")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("error building stripe-mock with `go tool -n stripe-mock`: %w\n%s", err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
})

// listeningRE matches the line stripe-mock prints once its listener is bound.
var listeningRE = regexp.MustCompile(`Listening for HTTP at address: (\S+)`)

// Start runs stripe-mock on a free loopback port, waits until it answers, and stops it when the
// test ends. It returns the base URL to give stripe-go as BackendConfig.URL. It fails the test
// if stripe-mock cannot be built or does not come up.
func Start(tb testing.TB) string {
	tb.Helper()

	bin, err := binary()
	if err != nil {
		tb.Fatalf("stripemock: %v", err)
	}

	output := &proctest.SyncBuffer{}
	// Port 0 lets the kernel pick a free port, which stripe-mock then prints: no race with
	// another test over a port picked in advance.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0")
	cmd.Stdout = output
	cmd.Stderr = output
	if err := cmd.Start(); err != nil {
		tb.Fatalf("stripemock: error starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // a killed stripe-mock exits with an error; that is how it is stopped
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill() // it may have exited already
		<-exited
	})

	ctx, cancel := context.WithTimeout(tb.Context(), startTimeout)
	defer cancel()
	url, err := waitUntilAnswering(ctx, output, exited)
	if err != nil {
		tb.Fatalf("stripemock: %v\nstripe-mock output:\n%s", err, output.String())
	}
	return url
}

// waitUntilAnswering waits for stripe-mock to print its address and then to answer a request.
func waitUntilAnswering(ctx context.Context, output *proctest.SyncBuffer, exited <-chan struct{}) (string, error) {
	const pollInterval = 20 * time.Millisecond
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()

	url := ""
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("stripe-mock did not answer within %v: %w", startTimeout, ctx.Err())
		case <-exited:
			return "", errors.New("stripe-mock exited before answering")
		case <-ticker.C:
		}

		if url == "" {
			m := listeningRE.FindStringSubmatch(output.String())
			if m == nil {
				continue
			}
			url = "http://" + m[1]
		}
		if answers(ctx, url) {
			return url, nil
		}
	}
}

// answers reports whether stripe-mock handles a request at url, any answer at all counting.
func answers(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/charges", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer sk_test_stripemock")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = res.Body.Close() // only the status line mattered
	return true
}
