// Package jaeger runs Jaeger, the tracing backend, on loopback for development and tests: its
// all-in-one program receives OTLP over HTTP, keeps the traces in memory, and serves its query
// API, each on a free port of its own. Client reads the traces back. Built from its Go module,
// Jaeger has no UI to serve, only a placeholder page: the UI is a JavaScript build that the
// module does not ship.
package jaeger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// Start and Stop wait at most this long: a cold start on a loaded machine takes a few seconds.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
)

// Config is how Start runs Jaeger.
type Config struct {
	// Root is the repository's root, which holds the tool module (ToolModuleDir).
	Root string

	// Output receives Jaeger's log: warnings and errors only, as a running Jaeger has nothing
	// else to tell a developer. Nil discards it.
	Output io.Writer
}

// Server is a running Jaeger.
type Server struct {
	// OTLPEndpoint is the base URL of its OTLP/HTTP receiver, what OTEL_EXPORTER_OTLP_ENDPOINT
	// takes: an exporter posts to OTLPEndpoint + "/v1/traces".
	OTLPEndpoint string

	// QueryURL is where its query API (/api/...) is served.
	QueryURL string

	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
	err    error
}

// Start builds Jaeger if need be (see Binary), starts it on free loopback ports, and returns it
// once its receiver and its query API both answer. Stop stops it.
func Start(ctx context.Context, config Config) (*Server, error) {
	bin, err := Binary(ctx, config.Root)
	if err != nil {
		return nil, err
	}
	ports := make([]int, 3) // OTLP/HTTP, query HTTP, query gRPC
	for i := range ports {
		if ports[i], err = supervisor.FreePort(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "rocketrides-jaeger")
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(dir, "config.yaml")
	var text strings.Builder
	if err := configTemplate.Execute(&text, map[string]int{
		"OTLPPort": ports[0], "QueryPort": ports[1], "QueryGRPCPort": ports[2],
	}); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(configFile, []byte(text.String()), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}

	s := &Server{
		OTLPEndpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		QueryURL:     fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		dir:          dir,
		exited:       make(chan struct{}),
	}
	s.cmd = exec.Command(bin, "--config", configFile)
	s.cmd.Dir = dir
	if config.Output != nil {
		s.cmd.Stdout, s.cmd.Stderr = config.Output, config.Output
	}
	// Killed with its parent, so that a crashed test or dev leaves no Jaeger behind; a group of
	// its own keeps a terminal's Ctrl-C from stopping it before the processes that report to it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("error starting Jaeger: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady returns once the OTLP receiver takes an (empty) export and the query API answers:
// the collector starts its receivers after the query extension, so either alone is too early.
func (s *Server) waitReady(ctx context.Context) error {
	gone := func() error {
		select {
		case <-s.exited:
			return fmt.Errorf("jaeger exited while starting: %v", s.err)
		default:
			return nil
		}
	}
	if err := supervisor.WaitOK(ctx, s.QueryURL+"/api/services", startTimeout, gone); err != nil {
		return err
	}
	return supervisor.WaitFor(ctx, "jaeger's OTLP receiver took no export", startTimeout, gone, func(ctx context.Context) error {
		return postEmptyExport(ctx, s.OTLPEndpoint)
	})
}

// postEmptyExport sends the receiver an export of no spans, which it answers 200.
func postEmptyExport(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/v1/traces", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Second}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/traces: %s", resp.Status)
	}
	return nil
}

// Pid is the process id of Jaeger.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Exited is closed when Jaeger has exited, for whatever reason.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Stop sends Jaeger SIGTERM, kills it if it has not exited after stopTimeout, and removes its
// configuration. It returns an error unless Jaeger exited cleanly when asked.
func (s *Server) Stop() error {
	defer os.RemoveAll(s.dir)
	select {
	case <-s.exited:
		return fmt.Errorf("jaeger had exited: %v", s.err)
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if s.err != nil {
			return fmt.Errorf("jaeger: %w", s.err)
		}
		return nil
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("jaeger did not stop within " + stopTimeout.String() + " and was killed")
	}
}

// configTemplate is Jaeger's all-in-one configuration (its built-in one, cmd/jaeger/internal/
// all-in-one.yaml, with every port moved to a free one on loopback, the receivers that nothing
// here sends to left out, and its own metrics and tracing off): OTLP over HTTP in, an in-memory
// store, and the query API.
var configTemplate = template.Must(template.New("config.yaml").Parse(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn

extensions:
  jaeger_storage:
    backends:
      memory_store:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memory_store
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:{{.QueryPort}}
    grpc:
      endpoint: 127.0.0.1:{{.QueryGRPCPort}}

receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{{.OTLPPort}}

processors:
  batch:

exporters:
  jaeger_storage_exporter:
    trace_storage: memory_store
`))
