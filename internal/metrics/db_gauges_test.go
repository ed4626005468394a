package metrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// The gauges read from the database at scrape time: each scrape reads afresh, within a bound,
// and a failed read costs only its own series.
func TestDatabaseGauges(t *testing.T) {
	t.Parallel()

	t.Run("ReadAtEachScrape", func(t *testing.T) {
		t.Parallel()
		reg := metrics.NewRegistry()
		var reads atomic.Int64
		metrics.RegisterStagedJobs(reg, func(ctx context.Context) (*metrics.StagedJobs, error) {
			n := reads.Add(1)
			return &metrics.StagedJobs{Pending: n, Failed: 2, OldestPendingAge: 12500 * time.Millisecond}, nil
		})
		if reads.Load() != 0 {
			t.Fatalf("want no read at registration, got %d", reads.Load())
		}
		for i := 1; i <= 2; i++ {
			want := strings.NewReader(`
# HELP rocketrides_staged_job_oldest_age_seconds Age of the oldest staged job waiting to be enqueued; 0 when none waits.
# TYPE rocketrides_staged_job_oldest_age_seconds gauge
rocketrides_staged_job_oldest_age_seconds 12.5
# HELP rocketrides_staged_jobs Staged jobs waiting to be enqueued into River (not set aside), at the time of the scrape.
# TYPE rocketrides_staged_jobs gauge
rocketrides_staged_jobs ` + strconv.Itoa(i) + `
# HELP rocketrides_staged_jobs_failed Staged jobs set aside as failed, waiting for a person (admin list-failed-jobs).
# TYPE rocketrides_staged_jobs_failed gauge
rocketrides_staged_jobs_failed 2
`)
			if err := testutil.GatherAndCompare(reg, want, "rocketrides_staged_jobs", "rocketrides_staged_jobs_failed", "rocketrides_staged_job_oldest_age_seconds"); err != nil {
				t.Fatalf("scrape %d: %v", i, err)
			}
		}
	})

	t.Run("CountsByLabel", func(t *testing.T) {
		t.Parallel()
		reg := metrics.NewRegistry()
		metrics.RegisterRiverJobs(reg, func(ctx context.Context) (map[string]int64, error) {
			return map[string]int64{"available": 3, "discarded": 1, "running": 0}, nil
		})
		metrics.RegisterRequestsAwaitingReview(reg, func(ctx context.Context) (map[string]int64, error) {
			return map[string]int64{"reaped_unfinished": 4}, nil
		})
		want := strings.NewReader(`
# HELP rocketrides_requests_awaiting_review Requests recorded in abandoned_requests for a person to look at (admin list-abandoned), by reason, at the time of the scrape.
# TYPE rocketrides_requests_awaiting_review gauge
rocketrides_requests_awaiting_review{reason="reaped_unfinished"} 4
# HELP rocketrides_river_jobs River jobs by state, at the time of the scrape. Completed jobs are left out: their number is River's retention, not work.
# TYPE rocketrides_river_jobs gauge
rocketrides_river_jobs{state="available"} 3
rocketrides_river_jobs{state="discarded"} 1
rocketrides_river_jobs{state="running"} 0
`)
		if err := testutil.GatherAndCompare(reg, want, "rocketrides_river_jobs", "rocketrides_requests_awaiting_review"); err != nil {
			t.Fatal(err)
		}
	})

	// Prometheus gives a scrape 10 s by default: a query must give up well before.
	t.Run("ReadsWithinABound", func(t *testing.T) {
		t.Parallel()
		reg := metrics.NewRegistry()
		var bound atomic.Int64
		metrics.RegisterRiverJobs(reg, func(ctx context.Context) (map[string]int64, error) {
			if deadline, ok := ctx.Deadline(); ok {
				bound.Store(int64(time.Until(deadline)))
			}
			return nil, nil
		})
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
		if b := time.Duration(bound.Load()); b <= 0 || b > 5*time.Second {
			t.Fatalf("want the query bounded to at most 5 s, got a deadline %s away", b)
		}
	})

	t.Run("AFailedReadCostsOnlyItsOwnSeries", func(t *testing.T) {
		t.Parallel()
		reg := metrics.NewRegistry()
		reaper := metrics.NewReaper(reg)
		reaper.Keys.WithLabelValues(metrics.ReaperAbandoned).Add(2)
		down := errors.New("database is down")
		metrics.RegisterStagedJobs(reg, func(ctx context.Context) (*metrics.StagedJobs, error) { return nil, down })
		metrics.RegisterRiverJobs(reg, func(ctx context.Context) (map[string]int64, error) { return nil, down })

		var logs proctest.SyncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		server := httptest.NewServer(metrics.Handler(reg, logger))
		defer server.Close()

		resp, err := http.Get(server.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `rocketrides_reaper_keys_total{result="abandoned"} 2`) ||
			!strings.Contains(string(body), "go_goroutines ") {
			t.Fatalf("want 200 with the other series, got %d:\n%s", resp.StatusCode, body)
		}
		for _, absent := range []string{"rocketrides_staged_jobs", "rocketrides_river_jobs"} {
			if strings.Contains(string(body), absent) {
				t.Errorf("want no %s from a failed read, got:\n%s", absent, body)
			}
		}
		if !strings.Contains(logs.String(), "error reading staged jobs: database is down") ||
			!strings.Contains(logs.String(), "error counting River jobs: database is down") {
			t.Errorf("want both failures logged, got:\n%s", logs.String())
		}
	})
}
