package bootstrap

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestServeMetrics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs proctest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	t.Run("UnsetServesNothing", func(t *testing.T) {
		if err := ServeMetrics(ctx, &Config{}, logger, metrics.NewRegistry()); err != nil || strings.Contains(logs.String(), "Metrics: serving") {
			t.Fatalf("want nothing served, got %v: %s", err, logs.String())
		}
	})
	t.Run("ServesOnMetricsAddr", func(t *testing.T) {
		if err := ServeMetrics(ctx, &Config{MetricsAddr: "127.0.0.1:0"}, logger, metrics.NewRegistry()); err != nil {
			t.Fatal(err)
		}
		url := regexp.MustCompile(`http://[^\s"]+/metrics`).FindString(logs.String())
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines ") {
			t.Fatalf("want 200 with the Go runtime's series at %s, got %d", url, resp.StatusCode)
		}
	})
	t.Run("ATakenAddressFailsTheStart", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		err = ServeMetrics(ctx, &Config{MetricsAddr: taken.Addr().String()}, logger, metrics.NewRegistry())
		if err == nil || !strings.Contains(err.Error(), "METRICS_ADDR") {
			t.Fatalf("want an error naming METRICS_ADDR, got %v", err)
		}
	})
}
