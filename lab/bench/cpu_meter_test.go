package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPerRide(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, got, want string }{
		{"Micros", microsPerRide(1500*time.Millisecond, 1000), "1500"},
		{"MicrosRounded", microsPerRide(10*time.Millisecond, 3), "3333"},
		{"MicrosNoRide", microsPerRide(time.Second, 0), "n/a"},
		{"KB", kbPerRide(64*1024*1000, 1000), "64.0"},
		{"KBNoRide", kbPerRide(1, 0), "n/a"},
		{"Count", countPerRide(880_400, 1000), "880"},
		{"CountNoRide", countPerRide(1, 0), "n/a"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: want %s, got %s", tc.name, tc.want, tc.got)
		}
	}

	use := cpuUse{api: time.Millisecond, postgres: 2 * time.Millisecond, loadGenerator: 3 * time.Millisecond, standIn: 4 * time.Millisecond}
	if got := use.total(); got != 10*time.Millisecond {
		t.Errorf("want the total of the four processes, 10ms, got %s", got)
	}
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	metrics := `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.1e-05
# HELP go_memstats_alloc_bytes_total Total number of bytes allocated in heap until now, even if released already.
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 1.23456789e+08
go_memstats_alloc_bytes 4.2e+06
# TYPE go_memstats_mallocs_total counter
go_memstats_mallocs_total 987654
`
	got, err := parseMetrics(strings.NewReader(metrics), metricAllocBytes, metricMallocs)
	if err != nil {
		t.Fatal(err)
	}
	if got[metricAllocBytes] != 123456789 || got[metricMallocs] != 987654 {
		t.Fatalf("got %v", got)
	}

	if _, err := parseMetrics(strings.NewReader(strings.Replace(metrics, "go_memstats_mallocs_total 987654", "", 1)), metricAllocBytes, metricMallocs); err == nil {
		t.Fatal("want an error for metrics without go_memstats_mallocs_total")
	}
	if _, err := parseMetrics(strings.NewReader("go_memstats_mallocs_total many\n"), metricMallocs); err == nil {
		t.Fatal("want an error for a value that is not a number")
	}
}

func TestPostmasterPID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte("4242\n/tmp/data\n1764324000\n5432\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid, err := postmasterPID(dir); err != nil || pid != 4242 {
		t.Fatalf("want 4242, got %d, %v", pid, err)
	}
	if _, err := postmasterPID(t.TempDir()); err == nil {
		t.Fatal("want an error for a data directory without a running server")
	}
}
