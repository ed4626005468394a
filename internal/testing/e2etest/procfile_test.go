//go:build procfile

package e2etest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/devenv/race"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

// procfileProcesses are the Procfile's process types, in its order: foreman gives the i-th
// PORT+100*i.
var procfileProcesses = []string{"api", "worker", "enqueuer", "completer", "reaper", "ui"}

// procfileBinary is the command that the Procfile's line for process runs: its own, but for
// River's UI, which admin serves.
func procfileBinary(process string) string {
	if process == "ui" {
		return "admin"
	}
	return process
}

// apiMetricsPortOffset is where the Procfile puts the API's /metrics, above its public PORT.
const apiMetricsPortOffset = 50

// TestProcfile follows the Procfile steps of docs/operations.md as written, in a copy of the
// repository, with a real Procfile manager: the build step; .env from dev -env with a PORT of this test's own,
// which moves every other port, as tests running at once need (its mail server edited in); the
// database that dev -db-only runs where .env says; the migration; the Stripe stand-in where .env
// says; the manager. It checks that every process runs from the binaries the build step made (or,
// for Procfile.dev, built on start), books a ride and waits for its receipt, checks that nothing
// else was booked or asked beside it (checkOnlyRide), runs the simulator's opt-in line, reads
// every process's /metrics on the port the Procfile gives it while all run, and River's UI's list
// of the ride's receipt job on the UI's, stops the manager and checks that every process exited 0 within the grace period .foreman sets, that
// nothing was killed, that the manager exited 0, and that no process, lock or running job is
// left; then it stops the background jobs as the page says, with kill, and checks that none of
// the database's processes is left either. The managers must be installed, so it runs under the
// procfile build tag: `go test -tags procfile -run TestProcfile ./internal/testing/e2etest`
// (.ci/run installs them and runs it).
func TestProcfile(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	// The build step is the same for every manager: it runs once, in a copy of the repository
	// that each run below copies again, binaries and all.
	steps := procfileSteps(t, filepath.Join(root, procfileStepsPage))
	if !strings.HasPrefix(steps[0], "go build ") {
		t.Fatalf("want the Procfile steps to start with the build step, got %q", steps[0])
	}
	built := copyRepository(t, root, false)
	runStep(t, built, goEnv(), steps[0])
	steps = steps[1:]

	t.Run("Foreman", func(t *testing.T) {
		t.Parallel()
		runProcfileSteps(t, built, steps, procfileRun{
			manager: "foreman", install: "Debian: apt-get install ruby-foreman",
			binDir: "bin", cleanExit: "exited with code 0",
			// What a service manager or `kill` does; foreman passes SIGTERM on.
			stop: func(p *proctest.Process) error { return p.Signal(syscall.SIGTERM) },
		})
	})
	t.Run("NodeForeman", func(t *testing.T) {
		t.Parallel()
		runProcfileSteps(t, built, steps, procfileRun{
			manager: "nf", install: "npm install -g foreman",
			binDir: "bin", cleanExit: "Exited Successfully",
			// Ctrl-C in a terminal, the one way node-foreman stops its processes: a SIGTERM to nf
			// ends nf alone and leaves them running.
			stop: func(p *proctest.Process) error { return p.SignalGroup(syscall.SIGINT) },
		})
	})
	t.Run("ForemanProcfileDev", func(t *testing.T) {
		t.Parallel()
		runProcfileSteps(t, built, steps, procfileRun{
			manager: "foreman", install: "Debian: apt-get install ruby-foreman",
			startArgs: []string{"-f", "Procfile.dev"},
			binDir:    filepath.Join(".data", "bin"), cleanExit: "exited with code 0",
			stop: func(p *proctest.Process) error { return p.Signal(syscall.SIGTERM) },
		})
	})
}

// procfileRun is one way of running the Procfile steps.
type procfileRun struct {
	manager   string   // the command that stands where the steps say foreman
	install   string   // how to install it, for the failure message
	startArgs []string // added to "<manager> start"
	binDir    string   // where the running processes' binaries must be, in the repository
	cleanExit string   // what the manager prints after a process's name when it exited with 0
	stop      func(*proctest.Process) error
}

// runProcfileSteps runs steps, the Procfile steps after the build step, in a copy of
// built, the repository with the build step done.
func runProcfileSteps(t *testing.T, built string, steps []string, run procfileRun) {
	if _, err := exec.LookPath(run.manager); err != nil {
		t.Fatalf("%s is not on PATH: install it (%s)", run.manager, run.install)
	}
	ctx := context.Background()
	app := copyRepository(t, built, true)
	// As root, dev -db-only's Postgres runs as the postgres user, which must reach app/.data.
	for _, dir := range []string{filepath.Dir(app), filepath.Dir(filepath.Dir(app))} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mail := smtptest.NewServer(t, smtptest.Options{})
	port := freePortBlock(t)
	// A shell's environment: nothing of this test's own, but Go's settings for Procfile.dev's builds.
	shellEnv := goEnv()
	// What .env says once written, every port from the one PORT of this test's own.
	var env map[string]string

	var manager, database, stripe *proctest.Process
	for _, line := range steps {
		fields := strings.Fields(line)
		background := strings.HasSuffix(line, "&")
		command := strings.TrimSpace(strings.TrimSuffix(line, "&"))
		if fields[0] == "foreman" {
			command = run.manager + strings.TrimPrefix(command, "foreman")
		}
		switch {
		case fields[0] == "foreman" && len(fields) > 1 && fields[1] == "start":
			args := append(fields[1:], run.startArgs...)
			manager = proctest.StartIn(t, app, run.manager, shellEnv, args...)
			killGroupOnFailure(t, manager)
		case background && strings.Contains(command, " bin/fakestripe "):
			// A background job like the database's: the stand-in listens where .env says.
			stripe = proctest.StartIn(t, app, "sh", shellEnv, "-c", command)
			killGroupOnFailure(t, stripe)
			if got := strings.TrimSpace(proctest.WaitOutput(t, stripe, "http://", 30*time.Second)); got != env["STRIPE_API_URL"] {
				t.Fatalf("want the stand-in at %s, as .env says, got %q", env["STRIPE_API_URL"], got)
			}
		case background && strings.Contains(command, " ./cmd/dev -db-only"):
			// As a shell runs a background job: in a process group of its own, which kill %N
			// signals. It serves the database where .env says, and says so once it is ready.
			database = proctest.StartIn(t, app, "sh", shellEnv, "-c", command)
			killGroupOnFailure(t, database)
			if got := proctest.WaitOutput(t, database, "DATABASE_URL=", 3*time.Minute); got != "DATABASE_URL="+env["DATABASE_URL"] {
				t.Fatalf("want -db-only to print DATABASE_URL=%s, as .env says, got %q", env["DATABASE_URL"], got)
			}
		case background:
			t.Fatalf("the Procfile steps in %s start %q, which this test does not know", procfileStepsPage, line)
		case strings.HasPrefix(command, "bin/dev -env > .env"):
			// With a PORT of this test's own, as tests running at once need: every other port
			// follows it. And this test's mail server.
			runStep(t, app, append(shellEnv, "PORT="+strconv.Itoa(port)), command)
			editEnvFile(t, filepath.Join(app, ".env"), map[string]string{"SMTP_URL": mail.URL()})
			env = map[string]string{}
			for _, kv := range readEnvFile(t, filepath.Join(app, ".env")) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			if env["PORT"] != strconv.Itoa(port) {
				t.Fatalf("want .env's PORT=%d, got %q", port, env["PORT"])
			}
		default:
			runStep(t, app, shellEnv, command)
		}
	}
	if manager == nil || database == nil || stripe == nil || env == nil {
		t.Fatal("the Procfile steps never write .env with dev -env, or never run foreman start, dev -db-only or the stand-in")
	}
	apiURL := env["API_URL"]
	databaseURL := env["DATABASE_URL"]
	proctest.WaitHTTP(t, manager, apiURL+"/readyz", 3*time.Minute) // Procfile.dev compiles first

	// Every process runs from the binaries in binDir: the Procfile's from the build step's, and no
	// process of Procfile.dev's is still building once all are up.
	binDir, err := filepath.EvalSymlinks(filepath.Join(app, run.binDir))
	if err != nil {
		t.Fatal(err)
	}
	procs := waitProcesses(t, manager, binDir, 3*time.Minute)

	token := createRider(t, filepath.Join(app, "bin", "admin"), readEnvFile(t, filepath.Join(app, ".env")), "procfile@example.com")
	c := &client.Client{BaseURL: apiURL, Token: token}
	result, err := c.CreateRide(ctx, client.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4})
	if err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var sent bool
		if err := conn.QueryRow(ctx, `SELECT receipt_sent_at IS NOT NULL FROM rides WHERE id = $1`, result.Ride.ID).Scan(&sent); err != nil {
			t.Fatal(err)
		}
		if sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipt recorded for ride %s:\n%s", result.Ride.ID, manager.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	found := false
	for _, m := range mail.Messages() {
		found = found || (len(m.To) == 1 && m.To[0] == "procfile@example.com")
	}
	if !found {
		t.Fatal("want the receipt email delivered to the rider")
	}
	checkOnlyRide(t, conn, c, manager, env["PORT"])
	// The simulator is opt-in, a line of its own; it books rides of its own through the same API.
	simulator := run.manager + strings.TrimPrefix(simulatorLine(t, filepath.Join(app, procfileStepsPage)), "foreman")
	if out := runStep(t, app, shellEnv, simulator+" -rides 2 -riders 2 -interval 10ms"); strings.Count(out, "Simulator: ride booked") != 2 {
		t.Fatalf("want the opt-in simulator to book its 2 rides, got:\n%s", out)
	}

	checkProcfileMetrics(t, manager, port)
	checkProcfileUI(t, manager, port, result.Ride.ID)

	grace := foremanTimeout(t, app)
	stopping := time.Now()
	if err := run.stop(manager); err != nil {
		t.Fatal(err)
	}
	managerCode := manager.Wait(t, 2*grace)
	took := time.Since(stopping)
	t.Logf("%s stopped every process in %s", run.manager, took.Round(time.Millisecond))
	if took > grace {
		t.Fatalf("want every process stopped within %s, the grace .foreman gives, took %s:\n%s", grace, took, manager.Output())
	}
	output := manager.Output()
	if strings.Contains(output, "SIGKILL") {
		t.Fatalf("want every process to stop within the manager's grace period:\n%s", output)
	}
	// The manager's own status, which a service manager or a script goes by: foreman's is that
	// of the first process to exit, and node-foreman's its own. Each process's status is in the
	// manager's output.
	if managerCode != 0 {
		t.Errorf("want %s to exit 0 after a clean stop, got %d", run.manager, managerCode)
	}
	for _, name := range procfileProcesses {
		if !hasLine(output, name+".1", run.cleanExit) {
			t.Fatalf("want %s to exit with status 0 (%q):\n%s", name, run.cleanExit, output)
		}
	}
	for name, query := range map[string]string{
		"locked keys":  `SELECT count(*) FROM idempotency_keys WHERE locked_at IS NOT NULL`,
		"running jobs": `SELECT count(*) FROM river_job WHERE state = 'running'`,
	} {
		var n int
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil || n != 0 {
			t.Fatalf("want no %s after a clean stop, got %d (%v)", name, n, err)
		}
	}
	for pid, exe := range procs {
		if now, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && now == exe {
			t.Fatalf("%s (pid %d) still runs after the manager stopped", exe, pid)
		}
	}
	conn.Close(ctx)
	stopDatabase(t, database)
	if err := stripe.SignalGroup(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stripe.Wait(t, 15*time.Second) // kill, as the steps say, ends the job; the Wait fails the test if it runs on
}

// killGroupOnFailure ends p's whole process group, which proctest made for it, should the test
// fail while it runs: a manager's processes, or a background job's.
func killGroupOnFailure(t *testing.T, p *proctest.Process) {
	t.Cleanup(func() {
		if t.Failed() {
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		}
	})
}

// stopDatabase stops dev -db-only as the Procfile steps say, kill %N: a SIGTERM to the background job's
// process group. Every process of the job must be gone, Postgres included, after dev stopped it;
// within 30 s, as Postgres's checkpoint at shutdown syncs to disk, which a loaded machine slows.
func stopDatabase(t *testing.T, database *proctest.Process) {
	t.Helper()
	procs := descendants(t, database.Pid())
	if !slices.ContainsFunc(slices.Collect(maps.Values(procs)), func(exe string) bool { return filepath.Base(exe) == "postgres" }) {
		t.Fatalf("want Postgres among the -db-only job's processes, got %v", procs)
	}
	procs[database.Pid()], _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", database.Pid()))
	if err := database.SignalGroup(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left := map[int]string{}
		for pid, exe := range procs {
			if now, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && now == exe {
				left[pid] = exe
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the -db-only job's processes gone after kill, left: %v\n%s", left, database.Output())
		}
	}
	if !strings.Contains(database.Output(), "Stopping PostgreSQL") {
		t.Fatalf("want dev to stop Postgres itself:\n%s", database.Output())
	}
}

// processSeries is a series that a process's metrics must hold, with its least value.
type processSeries struct {
	series  string
	atLeast float64
}

// ownSeries is a series of each process's own work, after this test's ride: its receipt was
// enqueued and mailed, and the opt-in simulator booked more.
var ownSeries = map[string]processSeries{
	"api":       {`rocketrides_ride_requests_total{outcome="created"}`, 2},
	"worker":    {`rocketrides_receipts_total{result="sent"}`, 1},
	"enqueuer":  {`rocketrides_enqueued_jobs_total`, 1},
	"completer": {`rocketrides_completer_keys_total{result="succeeded"}`, 0},
	"reaper":    {`rocketrides_reaper_keys_total{result="finished"}`, 0},
}

// checkProcfileMetrics checks that every process serves its own metrics at
// once, on the port the Procfile's convention gives it: each background process its own PORT,
// the API PORT+apiMetricsPortOffset; and that the API's public port has no /metrics.
func checkProcfileMetrics(t *testing.T, manager *proctest.Process, port int) {
	t.Helper()
	for i, name := range procfileProcesses {
		if name == "ui" {
			continue // River's UI serves no metrics
		}
		metricsPort := port + 100*i
		if name == "api" {
			metricsPort = port + apiMetricsPortOffset
		}
		// The process says where it listens, which ties the port to the process.
		if !hasLine(manager.Output(), name+".1", "Metrics: serving", fmt.Sprintf(":%d/metrics", metricsPort)) {
			t.Fatalf("want %s to serve its metrics on port %d:\n%s", name, metricsPort, manager.Output())
		}
		text := proctest.Scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		for _, want := range []processSeries{{"rocketrides_db_pool_max_conns", 1}, ownSeries[name]} {
			if got, ok := proctest.MetricValue(text, want.series); !ok || got < want.atLeast {
				t.Fatalf("want %s's metrics to hold %s of at least %v, got %v (present %t):\n%s", name, want.series, want.atLeast, got, ok, text)
			}
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("want /metrics to be 404 on the API's public port, got %d", resp.StatusCode)
	}
}

// checkProcfileUI checks that River's UI answers on loopback at the PORT that foreman gives its
// line, asking no login there (.env sets none), and lists the receipt job of the ride booked.
func checkProcfileUI(t *testing.T, manager *proctest.Process, port int, rideID string) {
	t.Helper()
	uiPort := port + 100*slices.Index(procfileProcesses, "ui")
	if !hasLine(manager.Output(), "ui.1", "UI: serving River's UI", fmt.Sprintf("url=http://127.0.0.1:%d/", uiPort)) {
		t.Fatalf("want River's UI on 127.0.0.1:%d:\n%s", uiPort, manager.Output())
	}
	status, body := proctest.Get(t, fmt.Sprintf("http://127.0.0.1:%d/api/jobs?state=completed", uiPort))
	if status != http.StatusOK || !strings.Contains(body, `\"ride_id\": \"`+rideID+`\"`) {
		t.Fatalf("want River's UI to list the receipt job of ride %s, got %d: %s", rideID, status, body)
	}
}

// procfileStepsPage is the page, from the repository's top, whose Procfile steps the test runs.
const procfileStepsPage = "docs/operations.md"

// procfileSteps returns the command lines of the Procfile steps in the page at path: the first
// sh block under the heading "### With a Procfile manager", without comments. The blocks after
// it (a rider, a booking) are for a person; this test books its own ride.
func procfileSteps(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n### With a Procfile manager\n")
	if !ok {
		t.Fatalf("%s has no section \"### With a Procfile manager\"", path)
	}
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		t.Fatalf("%s: the Procfile section has no sh block", path)
	}
	block, _, _ = strings.Cut(block, "\n```")
	var steps []string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			steps = append(steps, line)
		}
	}
	return steps
}

// copyRepository copies the repository at src into a temporary directory, leaving out git's
// data and the local state that the Procfile steps make (.data/, .env), so that the steps run as
// on a fresh checkout and leave the working tree alone. withBin takes src's bin/ along, as hard
// links since nothing writes to the binaries; without it, bin/ is left out too.
func copyRepository(t *testing.T, src string, withBin bool) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "rocketrides")
	skip := map[string]bool{".git": true, "bin": !withBin, ".data": true, ".env": true}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if skip[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !info.Mode().IsRegular():
			return nil
		case filepath.Dir(rel) == "bin":
			return os.Link(path, target)
		default:
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, info.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatalf("error copying the repository: %v", err)
	}
	return dst
}

// runStep runs one line of the steps with sh in dir, as a user's shell would, and returns its stdout.
// A step that fails fails the test.
func runStep(t *testing.T, dir string, env []string, line string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%q failed: %v\n%s%s", line, err, out, stderr.String())
	}
	return string(out)
}

// goEnv is the Go settings of this test's environment (GOCACHE, GOFLAGS, ...), which a user's
// shell would have too. A test run with -race adds -race to GOFLAGS, so that the steps' builds
// make the processes under the manager with the race detector, as proctest.Build does: a race
// report in the manager's output then fails the test (proctest.Start).
func goEnv() []string {
	var env []string
	goflags := ""
	for _, kv := range os.Environ() {
		if value, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			goflags = value
		} else if strings.HasPrefix(kv, "GO") {
			env = append(env, kv)
		}
	}
	if race.Enabled {
		goflags = strings.TrimSpace(goflags + " -race")
	}
	if goflags != "" {
		env = append(env, "GOFLAGS="+goflags)
	}
	return env
}

// editEnvFile sets keys in a KEY=VALUE file such as .env, as a person editing it would.
func editEnvFile(t *testing.T, path string, values map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	set := map[string]bool{}
	for i, line := range lines {
		key, _, ok := strings.Cut(line, "=")
		if value, edit := values[key]; ok && edit {
			lines[i] = key + "=" + value
			set[key] = true
		}
	}
	for key, value := range values {
		if !set[key] {
			lines = append(lines, key+"="+value)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readEnvFile reads the KEY=VALUE lines of a file such as .env.
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); strings.Contains(line, "=") && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	return env
}

// freePortBlock returns a base PORT for the Procfile such that every port that follows it (the
// API's, its metrics', each background process's, the database's and the stand-in's) was free a
// moment ago.
func freePortBlock(t *testing.T) int {
	t.Helper()
	offsets := []int{apiMetricsPortOffset, 601, 700}
	for i := 1; i < len(procfileProcesses); i++ {
		offsets = append(offsets, 100*i)
	}
	base, err := supervisor.FreePortBlock(offsets...)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// waitProcesses waits until the manager's processes are exactly the Procfile's, each running its
// binary from binDir, and returns their pids and binaries.
func waitProcesses(t *testing.T, manager *proctest.Process, binDir string, timeout time.Duration) map[int]string {
	t.Helper()
	want := map[string]bool{}
	for _, name := range procfileProcesses {
		want[filepath.Join(binDir, procfileBinary(name))] = true
	}
	var procs map[int]string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		procs = descendants(t, manager.Pid())
		got := map[string]bool{}
		for _, exe := range procs {
			got[exe] = true
		}
		if len(procs) == len(want) && len(got) == len(want) && allIn(got, want) {
			return procs
		}
	}
	t.Fatalf("want the manager's processes to be %v, got %v", want, procs)
	return nil
}

func allIn(got, want map[string]bool) bool {
	for exe := range got {
		if !want[exe] {
			return false
		}
	}
	return true
}

// descendants returns the processes below pid, with the binary each runs (proctest.Descendants).
func descendants(t *testing.T, pid int) map[int]string {
	t.Helper()
	procs := map[int]string{}
	for _, p := range proctest.Descendants(t, pid) {
		procs[p.Pid] = p.Exe()
	}
	return procs
}

// foremanTimeout is the grace between SIGTERM and SIGKILL that .foreman gives.
func foremanTimeout(t *testing.T, app string) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(app, ".foreman"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, "timeout:"); ok {
			seconds, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil {
				t.Fatalf(".foreman's timeout %q: %v", value, err)
			}
			return time.Duration(seconds) * time.Second
		}
	}
	t.Fatal(".foreman sets no timeout")
	return 0
}

// checkOnlyRide checks that an operator's first ride, booked by c, is alone: the Procfile books
// nothing by itself, so the database holds one rider, one ride and one key, the API answered one
// request, a 201, and logged no error; and .env leaves SIMULATE_ERRORS off, so raise_error is refused.
func checkOnlyRide(t *testing.T, conn *pgx.Conn, c *client.Client, manager *proctest.Process, port string) {
	t.Helper()
	ctx := context.Background()
	for table, want := range map[string]int{"users": 1, "rides": 1, "idempotency_keys": 1} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != want {
			t.Fatalf("want %d row in %s beside the first ride, got %d (%v):\n%s", want, table, n, err, manager.Output())
		}
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	text := proctest.Scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", p+apiMetricsPortOffset))
	created := false
	for _, line := range strings.Split(text, "\n") {
		series, value, _ := strings.Cut(line, " ")
		switch {
		case !strings.HasPrefix(series, "rocketrides_ride_requests_total{"):
		case series == `rocketrides_ride_requests_total{outcome="created"}` && value == "1":
			created = true
		case value != "0":
			t.Fatalf("want the API's one ride request to be the first ride's 201, got %s", line)
		}
	}
	if !created {
		t.Fatalf("want the API to count the first ride's 201, got:\n%s", text)
	}
	if out := manager.Output(); strings.Contains(out, "level=ERROR") || strings.Contains(out, "Simulator:") {
		t.Fatalf("want no error and no simulated ride beside the first ride:\n%s", out)
	}
	_, err = c.CreateRide(ctx, client.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4, RaiseError: true})
	if apiErr, ok := errors.AsType[*client.APIError](err); !ok || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "raise_error" {
		t.Fatalf("want raise_error refused with 400 where .env leaves SIMULATE_ERRORS off, got %v", err)
	}
}

// simulatorLine is the simulator's opt-in line in the page at path: the one command of its
// Procfile section that runs bin/simulator.
func simulatorLine(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "\n### With a Procfile manager\n")
	section, _, _ = strings.Cut(section, "\n### ")
	var found []string
	for _, line := range strings.Split(section, "\n") {
		if strings.Contains(line, "bin/simulator") && strings.HasPrefix(line, "foreman ") {
			found = append(found, strings.TrimSpace(line))
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one line of %s's Procfile section to run bin/simulator, got %q", path, found)
	}
	return found[0]
}
