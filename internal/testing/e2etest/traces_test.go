package e2etest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/devenv/jaeger"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// TestRideTraceInJaeger books one ride on the real processes, each told to send its traces to a
// Jaeger of the test's own, and finds the ride's whole trace in Jaeger by its Idempotency-Key, as
// an operator would: one trace, holding the API's request, both atomic phases, the charge sent
// to Stripe, and the enqueuer's and the worker's spans for the ride's receipt, every span's
// parent in the trace. No span says a secret the processes hold or the rider's card.
func TestRideTraceInJaeger(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	traces := startJaeger(t)
	b := startBase(t, "traced@example.com")
	const webhookSecret = "whsec_e2e_traces_secret"
	env := append(slices.Clip(b.env), "STRIPE_WEBHOOK_SECRET="+webhookSecret,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+traces.OTLPEndpoint,
		// The SDK's batches leave every 5 s by default; the test need not wait that long.
		"OTEL_BSP_SCHEDULE_DELAY=100")

	port := proctest.FreePort(t)
	api := proctest.Start(t, proctest.Build(t, "api"), append(env, fmt.Sprintf("PORT=%d", port)))
	enqueuer := proctest.Start(t, proctest.Build(t, "enqueuer"), env)
	worker := proctest.Start(t, proctest.Build(t, "worker"), env)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	proctest.WaitHTTP(t, api, apiURL+"/readyz", 15*time.Second)
	output := func() string {
		return fmt.Sprintf("api:\n%s\nenqueuer:\n%s\nworker:\n%s", api.Output(), enqueuer.Output(), worker.Output())
	}

	const key = "traced-ride-000000000001"
	rider := &client.Client{BaseURL: apiURL, Token: b.riderToken}
	if _, err := rider.CreateRideWithKey(ctx, key, client.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ride's receipt at the mail server", func() bool { return len(b.mail.Messages()) == 1 })

	query := &jaeger.Client{BaseURL: traces.QueryURL}
	var found []jaeger.Trace
	var missing string
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		found, err = query.FindTraces(ctx, "api", map[string]string{"rocketrides.idempotency_key": key})
		switch {
		case err != nil:
			missing = err.Error()
		case len(found) != 1:
			missing = fmt.Sprintf("%d traces for the key, want 1", len(found))
		default:
			missing = missingFromRideTrace(found[0])
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ride's trace in Jaeger after a minute: %s\n%s\n%s", missing, describeTraces(found), output())
		}
		time.Sleep(200 * time.Millisecond)
	}

	secrets := []string{b.riderToken, ridetest.TokenSecret, webhookSecret, "sk_test_e2e", "tok_visa"}
	for _, span := range found[0].Spans {
		for _, text := range spanTexts(span) {
			for _, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("span %s of %s says %q: %s", span.Operation, span.Service, secret, text)
				}
			}
		}
	}
	if os.Getenv(updateScreenshotsEnv) == "1" {
		screenshotTrace(t, found[0])
	}
}

// missingFromRideTrace says what trace lacks of a booked ride's whole trace, or "" if nothing.
func missingFromRideTrace(trace jaeger.Trace) string {
	ids := map[string]bool{}
	services := map[string]bool{}
	operations := map[string]bool{} // "service operation"
	phases, charges := 0, 0
	for _, s := range trace.Spans {
		ids[s.SpanID], services[s.Service] = true, true
		operations[s.Service+" "+s.Operation] = true
		if strings.HasPrefix(s.Operation, "atomic_phase") {
			phases++
		}
		if isChargeCall(s) {
			charges++
		}
	}
	var missing []string
	for _, service := range []string{"api", "enqueuer", "worker"} {
		if !services[service] {
			missing = append(missing, "no span of "+service)
		}
	}
	// The article's two atomic phases around the charge, then the receipt's journey.
	for _, op := range []string{
		"api atomic_phase started -> ride_created", "api foreign_mutation charge", "api atomic_phase ride_created -> finished",
		"enqueuer enqueuer.hand_off send_ride_receipt", "worker river.work/send_ride_receipt", "worker smtp.send",
	} {
		if !operations[op] {
			missing = append(missing, "no span "+op)
		}
	}
	if phases != 2 {
		missing = append(missing, fmt.Sprintf("%d atomic_phase spans, want 2", phases))
	}
	if charges != 1 {
		missing = append(missing, fmt.Sprintf("%d client spans of POST /v1/charges, want 1", charges))
	}
	for _, s := range trace.Spans {
		if s.ParentSpanID != "" && !ids[s.ParentSpanID] {
			missing = append(missing, fmt.Sprintf("the parent %s of %s's span %s", s.ParentSpanID, s.Service, s.Operation))
		}
	}
	return strings.Join(missing, "; ")
}

// isChargeCall reports whether s is an HTTP client span of a request to Stripe's charges.
func isChargeCall(s jaeger.Span) bool {
	if s.Tags["span.kind"] != "client" {
		return false
	}
	for _, tag := range []string{"url.full", "url.path", "http.url", "http.target"} {
		if strings.HasSuffix(s.Tags[tag], "/v1/charges") {
			return true
		}
	}
	return false
}

// spanTexts returns every text a span carries: its name, its tags, its events' fields and its
// service's tags.
func spanTexts(s jaeger.Span) []string {
	texts := []string{s.Operation}
	for _, tags := range append([]map[string]string{s.Tags, s.ServiceTags}, s.Logs...) {
		for k, v := range tags {
			texts = append(texts, k+"="+v)
		}
	}
	return texts
}

// describeTraces lists the spans of traces, one a line, for a failure's message.
func describeTraces(traces []jaeger.Trace) string {
	var b strings.Builder
	for _, trace := range traces {
		fmt.Fprintf(&b, "trace %s:\n", trace.ID)
		for _, s := range trace.Spans {
			fmt.Fprintf(&b, "  %s %s %s (parent %s) %v\n", s.Service, s.SpanID, s.Operation, s.ParentSpanID, s.Tags)
		}
	}
	return b.String()
}

// startJaeger starts a Jaeger of the test's own, stopped when the test ends.
func startJaeger(t *testing.T) *jaeger.Server {
	t.Helper()
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var log proctest.SyncBuffer
	server, err := jaeger.Start(t.Context(), jaeger.Config{Root: root, Output: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Errorf("%v\n%s", err, log.String())
		}
	})
	return server
}
