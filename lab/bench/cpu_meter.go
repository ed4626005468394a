package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// metricsTimeout bounds a read of the API's metrics.
const metricsTimeout = 10 * time.Second

// cpuMeter reads, from /proc, the CPU time (user + system) of the comparison's processes:
// Postgres, being the postmaster of the cluster the bench started and every process it forked,
// live or exited; the Stripe stand-in; and the bench itself, which loads the API.
type cpuMeter struct {
	procDir    string
	postmaster int
	standIn    int
}

// cpuReading is the CPU time each process had used when read.
type cpuReading struct{ postgres, standIn, bench time.Duration }

// cpuUse is what a run cost: the CPU time each process used, and the API's allocations.
type cpuUse struct {
	api, postgres, loadGenerator, standIn time.Duration
	// Of the API, from its Go runtime's metrics; 0 for pgbench.
	allocBytes, allocs float64
	// The CPUs each process was seen to be allowed on, as the kernel lists them ("0-1"); the
	// API's is empty for pgbench.
	cpusAPI, cpusPostgres, cpusLoadGenerator, cpusStandIn string
}

// where says which CPUs the processes of the run were allowed on.
func (u *cpuUse) where() string {
	api := ""
	if u.cpusAPI != "" {
		api = "API " + u.cpusAPI + ", "
	}
	return fmt.Sprintf("CPUs: %sPostgres %s, load generator %s, stand-in %s", api, u.cpusPostgres, u.cpusLoadGenerator, u.cpusStandIn)
}

// total is the CPU time all the processes used.
func (u *cpuUse) total() time.Duration { return u.api + u.postgres + u.loadGenerator + u.standIn }

// newCPUMeter meters the cluster whose data directory is dataDir and the stand-in with process
// id standInPID.
func newCPUMeter(dataDir string, standInPID int) (*cpuMeter, error) {
	postmaster, err := postmasterPID(dataDir)
	if err != nil {
		return nil, err
	}
	return &cpuMeter{procDir: "/proc", postmaster: postmaster, standIn: standInPID}, nil
}

// postmasterPID reads the process id of the server running on dataDir from the first line of
// its postmaster.pid.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("error reading Postgres's process id: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("error reading Postgres's process id: %w", err)
	}
	return pid, nil
}

// read reads the CPU time of Postgres, the stand-in and the bench. The bench's is its own
// alone: its children are Postgres, the stand-in, the API and pgbench, counted apart.
func (c *cpuMeter) read() (cpuReading, error) {
	postgres, err := treeCPU(c.procDir, c.postmaster)
	if err != nil {
		return cpuReading{}, fmt.Errorf("the Postgres server: %w", err)
	}
	standIn, err := treeCPU(c.procDir, c.standIn)
	if err != nil {
		return cpuReading{}, fmt.Errorf("the Stripe stand-in: %w", err)
	}
	bench, err := readProcTimes(c.procDir, os.Getpid())
	if err != nil {
		return cpuReading{}, err
	}
	return cpuReading{postgres: postgres, standIn: standIn, bench: bench.self}, nil
}

// since is what the processes used from before to now, the bench's time being the load
// generator's.
func (c *cpuMeter) since(before cpuReading) (*cpuUse, error) {
	now, err := c.read()
	if err != nil {
		return nil, err
	}
	use := &cpuUse{
		postgres:      now.postgres - before.postgres,
		standIn:       now.standIn - before.standIn,
		loadGenerator: now.bench - before.bench,
	}
	for pid, cpus := range map[int]*string{c.postmaster: &use.cpusPostgres, c.standIn: &use.cpusStandIn, os.Getpid(): &use.cpusLoadGenerator} {
		if *cpus, err = readCPUs(c.procDir, pid); err != nil {
			return nil, err
		}
	}
	return use, nil
}

// apiMeter meters a run of the API: the other processes as cpuMeter does, from before the load
// to the end of the run's sessions, and the API itself, CPU and allocations, from before the
// load to its end, while it still runs.
type apiMeter struct {
	meter      *cpuMeter
	pid        int
	metricsURL string

	before                    cpuReading
	apiBefore, apiAfter       time.Duration
	allocsBefore, allocsAfter goAllocs
	cpus                      string // the API's
}

// beginAPI reads the processes' CPU time and allocations before the load of the API whose
// process id is pid and whose metrics are at metricsURL.
func (c *cpuMeter) beginAPI(ctx context.Context, pid int, metricsURL string) (a *apiMeter, err error) {
	a = &apiMeter{meter: c, pid: pid, metricsURL: metricsURL}
	if a.allocsBefore, err = readGoAllocs(ctx, metricsURL); err != nil {
		return nil, err
	}
	if a.apiBefore, err = treeCPU(c.procDir, pid); err != nil {
		return nil, fmt.Errorf("the API: %w", err)
	}
	if a.before, err = c.read(); err != nil {
		return nil, err
	}
	return a, nil
}

// endLoad reads the API's CPU time and allocations once the load is over.
func (a *apiMeter) endLoad(ctx context.Context) (err error) {
	if a.apiAfter, err = treeCPU(a.meter.procDir, a.pid); err != nil {
		return fmt.Errorf("the API: %w", err)
	}
	if a.cpus, err = readCPUs(a.meter.procDir, a.pid); err != nil {
		return err
	}
	a.allocsAfter, err = readGoAllocs(ctx, a.metricsURL)
	return err
}

// end returns what the run cost, once its sessions have ended.
func (a *apiMeter) end() (*cpuUse, error) {
	use, err := a.meter.since(a.before)
	if err != nil {
		return nil, err
	}
	use.api, use.cpusAPI = a.apiAfter-a.apiBefore, a.cpus
	use.allocBytes = a.allocsAfter.bytes - a.allocsBefore.bytes
	use.allocs = a.allocsAfter.objects - a.allocsBefore.objects
	return use, nil
}

// goAllocs is what a Go process has allocated since it started: bytes and objects.
type goAllocs struct{ bytes, objects float64 }

// Names of the Prometheus Go collector's counters of allocations.
const (
	metricAllocBytes = "go_memstats_alloc_bytes_total"
	metricMallocs    = "go_memstats_mallocs_total"
)

// readGoAllocs reads a process's allocations from its Prometheus metrics at metricsURL. The
// scrape's own allocations land in the next reading.
func readGoAllocs(ctx context.Context, metricsURL string) (goAllocs, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return goAllocs{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return goAllocs{}, fmt.Errorf("error reading the API's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return goAllocs{}, fmt.Errorf("error reading the API's metrics: %s answered %d", metricsURL, resp.StatusCode)
	}
	values, err := parseMetrics(resp.Body, metricAllocBytes, metricMallocs)
	if err != nil {
		return goAllocs{}, fmt.Errorf("error reading the API's metrics: %w", err)
	}
	return goAllocs{bytes: values[metricAllocBytes], objects: values[metricMallocs]}, nil
}

// parseMetrics reads the values of the unlabelled metrics names from Prometheus's text format,
// each of which must be there.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	values := map[string]float64{}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		name, value, ok := strings.Cut(scanner.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		for _, want := range names {
			if name != want {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			values[name] = v
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := values[name]; !ok {
			return nil, fmt.Errorf("no %s in the metrics", name)
		}
	}
	return values, nil
}
