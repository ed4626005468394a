package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestMetrics books a ride, replays it and reuses its key with other parameters, then scrapes
// the API's METRICS_ADDR: each outcome is counted, and so are the HTTP requests, the atomic
// phases, the Stripe call and the pool. The public port has no /metrics.
func TestMetrics(t *testing.T) {
	t.Parallel()
	s := setup(t, "METRICS_ADDR=127.0.0.1:0")
	metricsURL := proctest.MetricsURL(t, s.api)

	if status, _, body := s.postRide(t); status != http.StatusCreated {
		t.Fatalf("want 201, got %d %s", status, body)
	}
	if status, replayed, body := s.postRide(t); status != http.StatusCreated || replayed != "true" {
		t.Fatalf("want the 201 replayed, got %d %q %s", status, replayed, body)
	}
	req, _ := http.NewRequest(http.MethodPost, s.base+"/rides",
		strings.NewReader("origin_lat=1.0&origin_lon=0.0&target_lat=0.0&target_lon=0.0"))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Idempotency-Key", "readme-key-0123456789abcdef")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("want the reused key refused with 422, got %d", resp.StatusCode)
	}

	resp, err = http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("want /metrics to be 404 on the public port, got %d", resp.StatusCode)
	}

	text := proctest.Scrape(t, metricsURL)
	for series, want := range map[string]float64{
		`rocketrides_ride_requests_total{outcome="created"}`:                         1,
		`rocketrides_ride_requests_total{outcome="replayed"}`:                        1,
		`rocketrides_ride_requests_total{outcome="key_reused"}`:                      1,
		`rocketrides_ride_requests_total{outcome="card_declined"}`:                   0,
		`rocketrides_http_requests_total{code="201",route="/rides"}`:                 2,
		`rocketrides_http_requests_total{code="422",route="/rides"}`:                 1,
		`rocketrides_http_requests_total{code="404",route="unmatched"}`:              1,
		`rocketrides_http_request_duration_seconds_count{route="/rides"}`:            3,
		`rocketrides_phase_duration_seconds_count{phase="started"}`:                  1,
		`rocketrides_phase_duration_seconds_count{phase="ride_created"}`:             1,
		`rocketrides_stripe_requests_total{result="succeeded"}`:                      1,
		`rocketrides_stripe_request_duration_seconds_count`:                          1,
		`rocketrides_stripe_connections_opened_total`:                                1,
		`rocketrides_db_pool_max_conns`:                                              16,
		`rocketrides_serialization_retries_total{phase="started"}`:                   0,  // one rider's sequential requests conflict with nothing; at 0 from the start
		`rocketrides_http_requests_total{code="200",route="/readyz"}`:                -1, // at least one, from the start
		`process_start_time_seconds`:                                                 -1, // the process collector (its CPU counter may read 0 ticks)
		`go_goroutines`:                                                              -1,
		`go_gc_gogc_percent`:                                                         400, // gcPercentDefault, as GOGC is unset
		`rocketrides_db_pool_acquires_total`:                                         -1,
		`rocketrides_ride_requests_total{outcome="payment_processor_unavailable"}`:   0,
		`rocketrides_stripe_requests_total{result="unreachable"}`:                    0,
		`rocketrides_http_request_duration_seconds_bucket{route="/rides",le="+Inf"}`: 3,
		`rocketrides_http_connections_shed_total{reason="oldest_at_cap"}`:            0,
		`rocketrides_http_connections_shed_total{reason="refused"}`:                  0,
	} {
		got, ok := proctest.MetricValue(text, series)
		switch {
		case want == -1:
			if !ok || got <= 0 {
				t.Errorf("%s = %v (present %t), want a positive value", series, got, ok)
			}
		case !ok || got != want:
			t.Errorf("%s = %v (present %t), want %v", series, got, ok, want)
		}
	}
	if t.Failed() {
		fmt.Println(text)
	}
	s.stop(t)
}
