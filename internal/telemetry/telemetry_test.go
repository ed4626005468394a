package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/tracing"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestWanted(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "api"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Wanted(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("Wanted(%v) = %v, want %v", tt.env, got, tt.want)
		}
	}
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what an exporter posts to /v1/traces,
// protobuf as the protocol has it.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.spans = append(rc.spans, req.ResourceSpans...)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestSetup: without an endpoint nothing is installed and the wrappers return what they were
// given; with one, a server span of a request reaches an OTLP receiver under the process's
// service name, found by the request's Idempotency-Key, and no header of the request (the
// rider's token) is in it.
func TestSetup(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
	shutdown, err := Setup(t.Context(), "api", func(string) string { return "" })
	if err != nil || shutdown(t.Context()) != nil {
		t.Fatalf("Setup without an endpoint: %v", err)
	}
	if Enabled() {
		t.Fatal("want tracing off without an endpoint")
	}
	inner := http.NotFoundHandler()
	if h := Handler(inner, "api"); h == nil || PgxTracer() != nil || Transport(http.DefaultTransport) != http.DefaultTransport {
		t.Fatal("want the handler and transport unwrapped and no pgx tracer without tracing")
	}

	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	shutdown, err = Setup(t.Context(), "api", func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() || PgxTracer() == nil {
		t.Fatal("want tracing on with an endpoint")
	}
	const token = "rr_test_secret_token_1234"
	server := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracing.SetKey(r.Context(), 42, "key-of-the-ride")
		tracing.SetRoute(r.Context(), r.Method, "/rides")
		w.WriteHeader(http.StatusCreated)
	}), "api"))
	t.Cleanup(server.Close)
	req, _ := http.NewRequest(http.MethodPost, server.URL+"/rides", strings.NewReader(`{"origin_lat":1}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "key-of-the-ride")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := shutdown(t.Context()); err != nil {
		t.Fatalf("flushing spans: %v", err)
	}

	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	if len(receiver.spans) == 0 {
		t.Fatal("the receiver got no spans")
	}
	var found bool
	for _, rs := range receiver.spans {
		if got := prototext.Format(rs); strings.Contains(got, token) {
			t.Errorf("the rider's token is in an exported span: %s", got)
		}
		var service string
		for _, a := range rs.Resource.GetAttributes() {
			if a.Key == "service.name" {
				service = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				for _, a := range s.Attributes {
					if a.Key == string(tracing.IdempotencyKey) && a.Value.GetStringValue() == "key-of-the-ride" {
						found = true
						if service != "api" || s.Name != "POST /rides" || s.Kind != tracepb.Span_SPAN_KIND_SERVER {
							t.Errorf("want a server span POST /rides of service api, got %q %v of %q", s.Name, s.Kind, service)
						}
					}
				}
			}
		}
	}
	if !found {
		t.Error("no exported span holds the request's Idempotency-Key")
	}
}

// TestPgxTracer: a statement and a batch sent inside a traced span are client spans holding
// their statements' text, and none of their arguments; one sent outside any makes no span.
func TestPgxTracer(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	config, err := pgx.ParseConfig(dbtest.NewEmptyDB(t))
	if err != nil {
		t.Fatal(err)
	}
	config.Tracer = newPgxTracer(provider)
	conn, err := pgx.ConnectConfig(t.Context(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	if _, err := conn.Exec(t.Context(), "SELECT 'untraced'"); err != nil {
		t.Fatal(err)
	}
	if n := len(exporter.GetSpans()); n != 0 {
		t.Fatalf("want no span of a statement sent outside a traced span, got %d", n)
	}

	ctx, parent := provider.Tracer("test").Start(t.Context(), "job")
	const secret = "tok_visa_secret_argument"
	var got string
	if err := conn.QueryRow(ctx, "SELECT $1::text", secret).Scan(&got); err != nil || got != secret {
		t.Fatalf("query: %v %q", err, got)
	}
	batch := &pgx.Batch{}
	batch.Queue("SELECT $1::text", secret)
	batch.Queue("SELECT 1")
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	if !parent.IsRecording() {
		t.Fatal("a statement's end ended the span that sent it")
	}
	parent.End()

	var stubs tracetest.SpanStubs
	for _, s := range exporter.GetSpans() {
		if s.Name != "job" {
			stubs = append(stubs, s)
		}
	}
	names := map[string]int{}
	for _, s := range stubs {
		names[s.Name]++
		if s.SpanKind.String() != "client" {
			t.Errorf("%s: want a client span, got %s", s.Name, s.SpanKind)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("%s: an argument is in attribute %s", s.Name, kv.Key)
			}
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("%s: an argument is in event %s", s.Name, kv.Key)
				}
			}
		}
	}
	if names["postgres SELECT"] != 1 || names["postgres batch"] != 1 {
		t.Fatalf("want one statement span and one batch span, got %v", names)
	}
	for _, s := range stubs {
		if s.Name == "postgres batch" && len(s.Events) != 2 {
			t.Errorf("want the batch's two statements as events, got %d", len(s.Events))
		}
	}
}

func TestStatementName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"SELECT 1":                                "postgres SELECT",
		"\n\t\tinsert INTO t VALUES (1)":          "postgres INSERT",
		"-- why\n-- and more\nUPDATE t SET a = 1": "postgres UPDATE",
		"commit":                               "postgres COMMIT",
		"WITH x AS (SELECT 1) SELECT * FROM x": "postgres WITH",
	} {
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}
