// Package proctest runs the project's real binaries in tests: it builds them once per test
// binary, starts them as separate processes with their output captured, and stops or kills them
// the way a process manager or a crash would.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/race"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{} // binaries by package path
)

// Build compiles ./cmd/<name> of this module and returns the path of the binary, built once per
// test binary. The build goes through supervisor.Build, which links each command once for all
// the test binaries of a `go test ./...` run, and once more only when its sources change, and
// builds it with the race detector when the test binary has it.
func Build(t testing.TB, name string) string {
	t.Helper()
	return BuildPackage(t, "./cmd/"+name)
}

// BuildPackage is Build for a main package named by its path from the module's root, such as a
// test's own program under testdata.
func BuildPackage(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := built[pkg]; ok {
		return path
	}
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if buildDir == "" {
		dir, err := runDir(root)
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if err := supervisor.BuildPackages(ctx, root, buildDir, pkg); err != nil {
		t.Fatalf("error building %s: %s", pkg, err)
	}
	path := filepath.Join(buildDir, filepath.Base(pkg))
	built[pkg] = path
	return path
}

// buildTimeout bounds building one command: seconds from the cache, a minute or so from scratch
// on a loaded machine.
const buildTimeout = 5 * time.Minute

// Process is a started binary.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{}
	err  error
}

// Start runs path with args and env (added to a minimal environment) and kills it when the test
// ends if it is still running.
func Start(t testing.TB, path string, env []string, args ...string) *Process {
	t.Helper()
	return StartIn(t, "", path, env, args...)
}

// StartIn is Start with the working directory dir.
//
// A race report in the process's output fails the test when it ends: a binary built by Build
// has the race detector when the test binary has it, and a race in a child is the test's bug as
// much as one in the test binary itself.
func StartIn(t testing.TB, dir, path string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{Name: filepath.Base(path), out: &SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	// Kill the child if the test binary dies, so that no process outlives a crashed test.
	// Its own process group lets a test signal the whole group, as a terminal's Ctrl-C does.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("error starting %s: %s", p.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		checkRaces(t, p.Name, p.Output())
		if t.Failed() {
			t.Logf("output of %s:\n%s", p.Name, p.Output())
		}
	})
	return p
}

// Output is everything the process wrote to stdout and stderr so far.
func (p *Process) Output() string { return p.out.String() }

// Pid is the process's id; with Start's process group of its own, also its group's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// SignalGroup sends sig to the process's whole process group, as a terminal's Ctrl-C does to
// the foreground job.
func (p *Process) SignalGroup(sig syscall.Signal) error { return syscall.Kill(-p.cmd.Process.Pid, sig) }

// Kill ends the process at once, as a crash would, and waits for it.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Wait waits up to timeout for the process to exit and returns its exit code, or fails the test.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s\n%s", p.Name, timeout, p.Output())
		return -1
	}
}

// Terminate stops the process with SIGTERM, as a process manager or a deploy does, and fails
// the test unless it exits 0 within timeout: the promise every process of Rocket Rides makes.
func (p *Process) Terminate(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, timeout); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0:\n%s", p.Name, code, p.Output())
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Run runs path to completion and returns its stdout, stderr and exit code. A race report in its
// output fails the test, as Start's does.
func Run(t testing.TB, path string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("error running %s: %s", path, err)
	}
	checkRaces(t, filepath.Base(path), outBuf.String()+"\n"+errBuf.String())
	return outBuf.String(), errBuf.String(), cmd.ProcessState.ExitCode()
}

// checkRaces fails the test with each race report in output, the output of the process name.
func checkRaces(t testing.TB, name, output string) {
	t.Helper()
	for _, report := range race.Reports(output) {
		t.Errorf("%s reported a data race:\n%s", name, report)
	}
}

// FreePort returns a port for a process to listen on, and perhaps again after a restart (see
// supervisor.FreePort for why it is not one the kernel picks).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := supervisor.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// WaitHTTP polls url until it answers 200, failing the test after timeout or if p exits first.
func WaitHTTP(t testing.TB, p *Process, url string, timeout time.Duration) {
	t.Helper()
	gone := func() error {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited before %s answered:\n%s", p.Name, url, p.Output())
		}
		return nil
	}
	if err := supervisor.WaitOK(t.Context(), url, timeout, gone); err != nil {
		t.Fatal(err)
	}
}

// WaitOutput waits until the process has printed a line containing substr, and returns that line.
func WaitOutput(t testing.TB, p *Process, substr string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(p.Output(), "\n") {
			if strings.Contains(line, substr) {
				return line
			}
		}
		if p.Exited() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not print %q within %s:\n%s", p.Name, substr, timeout, p.Output())
	return ""
}

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers: the output of a
// child process, copied in by exec while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// metricsURLPattern finds the address a process logged with "Metrics: serving".
var metricsURLPattern = regexp.MustCompile(`http://[^\s"]+/metrics`)

// MetricsURL waits for p to say where it serves its metrics (started with METRICS_ADDR, often
// 127.0.0.1:0) and returns that URL.
func MetricsURL(t testing.TB, p *Process) string {
	t.Helper()
	line := WaitOutput(t, p, "Metrics: serving", 15*time.Second)
	url := metricsURLPattern.FindString(line)
	if url == "" {
		t.Fatalf("%s logged no metrics URL: %s", p.Name, line)
	}
	return url
}

// Scrape fetches url, a /metrics endpoint, and returns the exposition text.
func Scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("error scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: want 200, got %d: %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// Get sends a GET to url, and returns the status and the body of the answer.
func Get(t testing.TB, url string) (status int, body string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("error getting %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("error reading %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// MetricValue returns the value of one series in exposition text, and whether it is there. The
// series is named as Prometheus prints it: labels sorted by name, a histogram's le last, as in
// `rocketrides_http_requests_total{code="201",route="/rides"}`.
func MetricValue(text, series string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return v, err == nil
		}
	}
	return 0, false
}
