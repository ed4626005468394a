package e2etest

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rocketrides/rocketrides/internal/devenv/jaeger"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// updateScreenshotsEnv, set to 1, makes the tests that show something to a person write their
// screenshot into docs/images, where the docs show it.
const updateScreenshotsEnv = "UPDATE_SCREENSHOTS"

// traceScreenshotFile is the picture of a ride's trace, under the repository's root, which
// docs/operations.md shows.
const traceScreenshotFile = "docs/images/ride-trace.png"

// screenshotTrace draws trace, as Jaeger's query API returned it, as a timeline in a page of its
// own, and writes a screenshot of the page in headless Chromium to traceScreenshotFile. The page
// is the test's because Jaeger built from its Go module serves no UI, only a placeholder.
func screenshotTrace(t *testing.T, trace jaeger.Trace) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("%s=1 needs Chromium (Debian: apt-get install chromium): %v", updateScreenshotsEnv, err)
	}
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := timelineTemplate.Execute(w, timeline(trace)); err != nil {
			t.Errorf("error drawing the trace: %v", err)
		}
	}))
	defer page.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.WindowSize(1200, 560),
		// Chromium refuses to run as root with its sandbox; the page is the test's own, on loopback.
		chromedp.NoSandbox)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// The first action starts the browser, which lives as long as that action's context: only
	// the screenshot has a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatalf("error opening the trace's page: %v", err)
	}
	shotCtx, cancelShot := context.WithTimeout(ctx, time.Minute)
	defer cancelShot()
	png, err := chromedp.Run(shotCtx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("error taking a screenshot of the trace: %v", err)
	}
	path := filepath.Join(root, traceScreenshotFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// timelineRow is one span of a drawn trace.
type timelineRow struct {
	Depth     int
	Service   string
	Operation string
	Color     string
	Left      float64 // where the span starts, in percent of the trace's length
	Width     float64 // how long it lasts, likewise
	Duration  time.Duration
	KeyTag    string // the API's request span's rocketrides.idempotency_key
	URL       string // an HTTP client span's
}

// timeline lays trace's spans out as rows, each under its parent, siblings by their start.
func timeline(trace jaeger.Trace) map[string]any {
	children := map[string][]jaeger.Span{}
	ids := map[string]bool{}
	for _, s := range trace.Spans {
		ids[s.SpanID] = true
	}
	start, end := trace.Spans[0].StartTime, trace.Spans[0].StartTime
	for _, s := range trace.Spans {
		parent := s.ParentSpanID
		if !ids[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], s)
		if s.StartTime.Before(start) {
			start = s.StartTime
		}
		if e := s.StartTime.Add(s.Duration); e.After(end) {
			end = e
		}
	}
	total := float64(max(end.Sub(start), time.Microsecond))
	colors := map[string]string{"api": "#4e79a7", "enqueuer": "#f28e2b", "worker": "#59a14f"}
	var rows []timelineRow
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		spans := children[parent]
		slices.SortFunc(spans, func(a, b jaeger.Span) int { return a.StartTime.Compare(b.StartTime) })
		for _, s := range spans {
			rows = append(rows, timelineRow{
				Depth: depth, Service: s.Service, Operation: s.Operation, Color: cmp.Or(colors[s.Service], "#999"),
				Left:     100 * float64(s.StartTime.Sub(start)) / total,
				Width:    max(100*float64(s.Duration)/total, 0.3),
				Duration: s.Duration.Round(10 * time.Microsecond), KeyTag: s.Tags["rocketrides.idempotency_key"],
				URL: cmp.Or(s.Tags["url.full"], s.Tags["http.url"]),
			})
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return map[string]any{"ID": trace.ID, "Spans": len(trace.Spans), "Length": end.Sub(start).Round(time.Millisecond), "Rows": rows}
}

var timelineTemplate = template.Must(template.New("timeline").Funcs(template.FuncMap{
	"indent": func(depth int) string { return fmt.Sprintf("%dpx", 8+16*depth) },
	"pct":    func(f float64) string { return fmt.Sprintf("%.2f%%", f) },
}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>
body { font: 13px/1.4 sans-serif; margin: 16px; color: #222; }
h1 { font-size: 16px; margin: 0 0 4px; }
p { margin: 0 0 12px; color: #555; }
table { border-collapse: collapse; width: 100%; }
td { padding: 3px 0; border-bottom: 1px solid #eee; white-space: nowrap; }
td.name { width: 44%; overflow: hidden; }
.service { display: inline-block; min-width: 64px; font-weight: bold; }
.bar { position: relative; height: 14px; }
.bar span { position: absolute; top: 0; height: 14px; border-radius: 2px; }
td.duration { width: 8%; text-align: right; color: #555; padding-left: 8px; }
</style></head><body>
<h1>A ride's trace, as Jaeger's query API returned it</h1>
<p>Trace {{.ID}}: {{.Spans}} spans over {{.Length}}</p>
<table>
{{range .Rows}}<tr>
<td class="name" style="padding-left: {{indent .Depth}}"><span class="service" style="color: {{.Color}}">{{.Service}}</span> {{.Operation}}{{if .KeyTag}} <small>(rocketrides.idempotency_key={{.KeyTag}})</small>{{end}}{{if .URL}} <small>{{.URL}}</small>{{end}}</td>
<td><div class="bar"><span style="left: {{pct .Left}}; width: {{pct .Width}}; background: {{.Color}}"></span></div></td>
<td class="duration">{{.Duration}}</td>
</tr>
{{end}}</table>
</body></html>
`))
