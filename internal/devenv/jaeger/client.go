package jaeger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client reads traces from Jaeger's query API, the HTTP API its UI reads (/api/...).
type Client struct {
	// BaseURL is the query API's, such as Server.QueryURL.
	BaseURL string

	// HTTPClient sends the requests; nil: one with a timeout of clientTimeoutDefault.
	HTTPClient *http.Client
}

// clientTimeoutDefault bounds each query: Jaeger answers from memory within milliseconds.
const clientTimeoutDefault = 10 * time.Second

// Trace is one trace as Jaeger holds it: every span received so far under its ID.
type Trace struct {
	ID    string
	Spans []Span
}

// Span is one span of a Trace.
type Span struct {
	SpanID string

	// ParentSpanID is the span's parent (its CHILD_OF reference), empty for a root span.
	ParentSpanID string

	// Service is the service.name of the process that sent the span; ServiceTags are the rest of
	// that process's resource attributes.
	Service     string
	ServiceTags map[string]string

	Operation string
	StartTime time.Time
	Duration  time.Duration

	// Tags are the span's attributes, each value as Jaeger prints it, plus span.kind,
	// otel.status_code and the like, which Jaeger adds.
	Tags map[string]string

	// Logs are the span's events, each as its fields, the event's name under "event".
	Logs []map[string]string
}

// Services returns the names of the services that have sent spans.
func (c *Client) Services(ctx context.Context) ([]string, error) {
	var services []string
	if err := c.get(ctx, "/api/services", nil, &services); err != nil {
		return nil, err
	}
	return services, nil
}

// FindTraces returns the traces holding a span of service whose tags include every one of tags,
// each trace with all of its spans.
func (c *Client) FindTraces(ctx context.Context, service string, tags map[string]string) ([]Trace, error) {
	query := url.Values{"service": {service}, "limit": {"100"}}
	if len(tags) > 0 {
		encoded, err := json.Marshal(tags)
		if err != nil {
			return nil, err
		}
		query.Set("tags", string(encoded))
	}
	var traces []wireTrace
	if err := c.get(ctx, "/api/traces", query, &traces); err != nil {
		return nil, err
	}
	return convertTraces(traces), nil
}

// Trace returns the trace with id, or an error wrapping ErrTraceNotFound.
func (c *Client) Trace(ctx context.Context, id string) (Trace, error) {
	var traces []wireTrace
	if err := c.get(ctx, "/api/traces/"+url.PathEscape(id), nil, &traces); err != nil {
		return Trace{}, err
	}
	if len(traces) != 1 {
		return Trace{}, fmt.Errorf("trace %s: %w", id, ErrTraceNotFound)
	}
	return convertTraces(traces)[0], nil
}

// ErrTraceNotFound is what Trace returns for a trace Jaeger does not hold.
var ErrTraceNotFound = errors.New("trace not found")

// get sends GET path?query and decodes the "data" member of the answer into data.
func (c *Client) get(ctx context.Context, path string, query url.Values, data any) error {
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: clientTimeoutDefault}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("error asking Jaeger for %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("error reading Jaeger's answer for %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: %w", path, ErrTraceNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaeger answered %s for %s: %s", resp.Status, path, body)
	}
	envelope := struct{ Data any }{Data: data}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("error decoding Jaeger's answer for %s: %w", path, err)
	}
	return nil
}

// wireTrace is a trace as the query API encodes it (Jaeger's own JSON model).
type wireTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime int64     `json:"startTime"` // microseconds since the epoch
		Duration  int64     `json:"duration"`  // microseconds
		Tags      []wireTag `json:"tags"`
		Logs      []struct {
			Fields []wireTag `json:"fields"`
		} `json:"logs"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string    `json:"serviceName"`
		Tags        []wireTag `json:"tags"`
	} `json:"processes"`
}

// wireTag is a tag of the query API: its value a string, a number or a boolean.
type wireTag struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

func convertTraces(wire []wireTrace) []Trace {
	traces := make([]Trace, len(wire))
	for i, w := range wire {
		t := Trace{ID: padTraceID(w.TraceID)}
		for _, ws := range w.Spans {
			process := w.Processes[ws.ProcessID]
			s := Span{
				SpanID:      ws.SpanID,
				Service:     process.ServiceName,
				ServiceTags: tagMap(process.Tags),
				Operation:   ws.OperationName,
				StartTime:   time.UnixMicro(ws.StartTime),
				Duration:    time.Duration(ws.Duration) * time.Microsecond,
				Tags:        tagMap(ws.Tags),
			}
			for _, ref := range ws.References {
				if ref.RefType == "CHILD_OF" {
					s.ParentSpanID = ref.SpanID
				}
			}
			for _, l := range ws.Logs {
				s.Logs = append(s.Logs, tagMap(l.Fields))
			}
			t.Spans = append(t.Spans, s)
		}
		traces[i] = t
	}
	return traces
}

// tagMap returns tags by key, each value a string's own text, or else its JSON.
func tagMap(tags []wireTag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, tag := range tags {
		var s string
		if err := json.Unmarshal(tag.Value, &s); err == nil {
			m[tag.Key] = s
		} else {
			m[tag.Key] = string(tag.Value)
		}
	}
	return m
}

// padTraceID returns id as 32 hex digits, as OpenTelemetry writes trace IDs: Jaeger's model
// leaves out the upper half when it is zero.
func padTraceID(id string) string {
	if len(id) < 32 {
		return strings.Repeat("0", 32-len(id)) + id
	}
	return id
}
