package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rocketrides/rocketrides/internal/devenv/jaeger"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// bannerTraces matches the banner's line that says where Jaeger's UI is.
var bannerTraces = regexp.MustCompile(`(?m)^  Traces +(http://127\.0\.0\.1:\d+) \(Jaeger`)

// TestDevTraces runs dev -traces as a user would: the banner says where Jaeger is, and every
// process that dev starts is given OTEL_EXPORTER_OTLP_ENDPOINT, the receiver of that same Jaeger:
// a span sent there with OpenTelemetry's exporter is found at the banner's URL. After the
// banner's first booking, the banner's trace command finds that ride's trace by its
// Idempotency-Key, as the banner says: from the API to the enqueuer and the worker's receipt.
// Ctrl-C stops Jaeger with the rest.
func TestDevTraces(t *testing.T) {
	t.Parallel()
	dev := proctest.Build(t, "dev")
	p := proctest.Start(t, dev, []string{fmt.Sprintf("PORT=%d", proctest.FreePort(t))}, "-traces")
	// A first run on the machine builds Jaeger, which takes minutes.
	proctest.WaitOutput(t, p, "Ctrl-C stops everything", 15*time.Minute)
	m := bannerTraces.FindStringSubmatch(p.Output())
	if m == nil {
		t.Fatalf("want the banner to say where Jaeger is, got:\n%s", p.Output())
	}
	client := &jaeger.Client{BaseURL: m[1]}

	procs := proctest.Descendants(t, p.Pid())
	proctest.CheckRunsAll(t, procs, append([]string{"jaeger"}, services...)...)
	endpoints := map[string]bool{}
	for _, proc := range procs {
		if slices.Contains(services, proc.Comm) {
			endpoint := environValue(t, proc.Pid, "OTEL_EXPORTER_OTLP_ENDPOINT")
			if endpoint == "" {
				t.Fatalf("%s was started without OTEL_EXPORTER_OTLP_ENDPOINT", proc)
			}
			endpoints[endpoint] = true
		}
	}
	if len(endpoints) != 1 {
		t.Fatalf("want every process to report to one endpoint, got %v", endpoints)
	}
	for endpoint := range endpoints {
		sendSpan(t, endpoint, "dev-traces-test")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		traces, err := client.FindTraces(t.Context(), "dev-traces-test", nil)
		if err == nil && len(traces) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the span sent to the processes' endpoint at the banner's Jaeger, got %d traces, %v", len(traces), err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	w := newWalkthrough(t, p.Output(), nil)
	var ride struct{ Ride struct{ ID string } }
	w.curl(t, w.command(t, `-H "Idempotency-Key: my-first-ride-0000000001"`)).require(t, http.StatusCreated, &ride)
	traceCommand := w.command(t, "/api/traces")
	deadline = time.Now().Add(time.Minute)
	for {
		out := w.sh.output(t, traceCommand)
		services := rideTraceServices(t, out, "my-first-ride-0000000001")
		if services["api"] && services["enqueuer"] && services["worker"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the banner's trace command to find the ride's trace by its key, with spans of the api, the enqueuer and the worker, got:\n%s\n%s", out, p.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}

	if err := p.SignalGroup(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("want exit 0 after Ctrl-C, got %d\n%s", code, p.Output())
	}
	proctest.CheckNoneRunning(t, procs)
}

// rideTraceServices returns the services that sent spans to the trace in out, Jaeger's answer
// to a query for traces, if it holds the API's span with the Idempotency-Key key. out must hold
// one trace at most.
func rideTraceServices(t *testing.T, out, key string) map[string]bool {
	t.Helper()
	var answer struct {
		Data []struct {
			Spans []struct {
				ProcessID string
				Tags      []struct{ Key, Value any }
			}
			Processes map[string]struct{ ServiceName string }
		}
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatalf("want Jaeger's answer, got %q: %v", out, err)
	}
	if len(answer.Data) > 1 {
		t.Fatalf("want one trace for the key, got %d:\n%s", len(answer.Data), out)
	}
	services := map[string]bool{}
	keyed := false
	for _, trace := range answer.Data {
		for _, span := range trace.Spans {
			service := trace.Processes[span.ProcessID].ServiceName
			services[service] = true
			for _, tag := range span.Tags {
				keyed = keyed || service == "api" && tag.Key == "rocketrides.idempotency_key" && tag.Value == key
			}
		}
	}
	if !keyed {
		return nil
	}
	return services
}

// environValue returns the value of name in the environment that process pid was started with.
func environValue(t *testing.T, pid int, name string) string {
	t.Helper()
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), name+"="); ok {
			return v
		}
	}
	return ""
}

// sendSpan sends one span of service to the OTLP/HTTP receiver at endpoint, as a process whose
// OTEL_EXPORTER_OTLP_ENDPOINT is endpoint does.
func sendSpan(t *testing.T, endpoint, service string) {
	t.Helper()
	exporter, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	_, span := provider.Tracer("dev_test").Start(t.Context(), "probe")
	span.End()
	if err := provider.Shutdown(t.Context()); err != nil {
		t.Fatalf("error sending a span to %s: %v", endpoint, err)
	}
}
