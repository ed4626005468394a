package metrics_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/internal/metrics"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	api := metrics.NewAPI(reg)
	api.RideRequests.WithLabelValues(metrics.RideCreated).Inc()
	server := httptest.NewServer(metrics.Handler(reg, slog.New(slog.DiscardHandler)))
	defer server.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	t.Run("Metrics", func(t *testing.T) {
		status, body := get("/metrics")
		for _, want := range []string{`rocketrides_ride_requests_total{outcome="created"} 1`, `rocketrides_ride_requests_total{outcome="card_declined"} 0`, "go_goroutines ", "process_cpu_seconds_total "} {
			if status != http.StatusOK || !strings.Contains(body, want) {
				t.Fatalf("want 200 with %q, got %d:\n%s", want, status, body)
			}
		}
	})
	t.Run("OtherPathsAreNotFound", func(t *testing.T) {
		if status, _ := get("/debug/pprof/"); status != http.StatusNotFound {
			t.Fatalf("want 404, got %d", status)
		}
	})
}

func TestStripeTransport(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	stripe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
	}))
	defer stripe.Close()

	m := metrics.NewStripe(nil)
	client := &http.Client{Transport: m.Transport(nil)}
	for _, tt := range []struct {
		status int
		result string
	}{
		{http.StatusOK, metrics.StripeSucceeded},
		{http.StatusPaymentRequired, metrics.StripeDeclined},
		{http.StatusTooManyRequests, metrics.StripeRateLimited},
		{http.StatusBadRequest, metrics.StripeRejected},
		{http.StatusBadGateway, metrics.StripeServerError},
	} {
		status = tt.status
		resp, err := client.Post(stripe.URL+"/v1/charges", "application/x-www-form-urlencoded", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := testutil.ToFloat64(m.Requests.WithLabelValues(tt.result)); got != 1 {
			t.Errorf("after a %d: %s = %v, want 1", tt.status, tt.result, got)
		}
	}

	stripe.Close()
	if _, err := client.Get(stripe.URL); err == nil {
		t.Fatal("want an error from a closed server")
	}
	if got := testutil.ToFloat64(m.Requests.WithLabelValues(metrics.StripeUnreachable)); got != 1 {
		t.Errorf("unreachable = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(m.RequestDuration); got != 1 {
		t.Errorf("want one duration histogram, got %d", got)
	}
}

// TestSerializationRetriesStartAtZero: the alert on serialization retries takes a rate() of the
// series, which sees nothing of a series that does not exist yet; each phase's must be there,
// at 0, before the first retry.
func TestSerializationRetriesStartAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics.NewPhases(reg, "started", "ride_created", "charge_created")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "rocketrides_serialization_retries_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && m.GetCounter().GetValue() == 0 {
					phases[l.GetValue()] = true
				}
			}
		}
	}
	for _, phase := range []string{"started", "ride_created", "charge_created"} {
		if !phases[phase] {
			t.Errorf("want rocketrides_serialization_retries_total{phase=%q} at 0 before any retry, got %v", phase, phases)
		}
	}
}
