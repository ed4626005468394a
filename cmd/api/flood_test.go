package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// TestFloodOfConnections holds, from other loopback addresses, 5,000 connections that sent one
// request and stay silent, and 2,000 that send their headers a line a second, each reopened as
// soon as the API drops it, as a hostile client would: 7,000 in all, past the API's 4,096. A
// rider from 127.0.0.1 meanwhile books rides and reads them back: every request succeeds. The
// rider's latencies are logged, not bounded: on a loaded machine they measure the machine.
func TestFloodOfConnections(t *testing.T) {
	t.Parallel()
	requireFileDescriptors(t, 10_000)
	s := setup(t, "METRICS_ADDR=127.0.0.1:0",
		"RIDER_RIDES_PER_MINUTE=60000", "RIDER_RIDE_BURST=1000", "RIDER_REQUESTS_PER_MINUTE=60000", "RIDER_REQUEST_BURST=1000",
		"RIDER_READS_PER_MINUTE=60000", "RIDER_READ_BURST=1000")
	metricsURL := proctest.MetricsURL(t, s.api)
	server := strings.TrimPrefix(s.base, "http://")

	ctx, stopFloods := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { stopFloods(); wg.Wait() }()
	var floods []*flood
	start := func(f *flood) {
		floods = append(floods, f)
		wg.Go(func() { f.run(ctx) })
	}

	// One address tries to hold 300 connections, past its cap of 100, before the others come
	// (which would shed its connections at the cap of all first).
	greedy := &flood{server: server, source: "127.0.0.60", conns: 300}
	start(greedy)
	waitFor(t, 2*time.Minute, "one address to open 300 connections", func() bool { return greedy.opened.Load() >= 300 })
	for i := range 47 {
		start(&flood{server: server, source: fmt.Sprintf("127.0.0.%d", 10+i), conns: 100})
	}
	for i := range 20 {
		start(&flood{server: server, source: fmt.Sprintf("127.0.0.%d", 70+i), conns: 100, slowHeaders: true})
	}

	// Until every flooding connection has been opened once, and the API holds as many as it
	// allows.
	var open float64
	waitFor(t, 3*time.Minute, "the flood to fill the API's connections", func() bool {
		for _, f := range floods {
			if f.opened.Load() < int64(f.conns) {
				return false
			}
		}
		open, _ = proctest.MetricValue(proctest.Scrape(t, metricsURL), "rocketrides_http_connections")
		return open >= 4000
	})
	if open > 4096 {
		t.Fatalf("want at most MAX_CONNECTIONS=4096 open, got %v", open)
	}

	// The rider books and reads for at least 10 s (three header timeouts of the slow flood).
	rider := &http.Client{Timeout: time.Minute}
	var took []time.Duration
	var failures []string
	timed := func(req *http.Request, want int) []byte {
		req.Header.Set("Authorization", "Bearer "+s.token)
		start := time.Now()
		resp, err := rider.Do(req)
		took = append(took, time.Since(start))
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
			return nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			failures = append(failures, fmt.Sprintf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, body))
			return nil
		}
		return body
	}
	for start := time.Now(); len(took) < 200 || time.Since(start) < 10*time.Second; {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/rides",
			strings.NewReader("origin_lat=0.0&origin_lon=0.0&target_lat=1.0&target_lon=1.0"))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("flood-%d-%d", time.Now().UnixNano(), len(took)))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		var created resource.RideCreated
		if body := timed(req, http.StatusCreated); body == nil || json.Unmarshal(body, &created) != nil {
			continue
		}
		req, _ = http.NewRequest(http.MethodGet, fmt.Sprintf("%s/rides/%d", s.base, created.Ride.ID), nil)
		timed(req, http.StatusOK)
	}
	text := proctest.Scrape(t, metricsURL)
	stopFloods()
	wg.Wait()

	var opened, dropped int64
	for _, f := range floods {
		opened, dropped = opened+f.opened.Load(), dropped+f.dropped.Load()
	}
	slices.Sort(took)
	p99 := took[len(took)*99/100]
	t.Logf("rider: %d requests, %d failed; p50 %s, p99 %s, slowest %s; flood: %d connections opened, %d dropped by the API",
		len(took), len(failures), took[len(took)/2].Round(time.Millisecond), p99.Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond), opened, dropped)
	if len(failures) > 0 {
		t.Errorf("want every request of the rider to succeed, %d failed, the first: %s", len(failures), failures[0])
	}
	for _, reason := range []string{"oldest_at_cap", "oldest_of_address"} {
		series := fmt.Sprintf(`rocketrides_http_connections_shed_total{reason=%q}`, reason)
		if got, _ := proctest.MetricValue(text, series); got <= 0 {
			t.Errorf("want connections shed, got %s = %v", series, got)
		}
	}
}

// requireFileDescriptors fails the test unless a process may open n files: the test and the API
// each hold thousands of sockets. Go raises its soft limit to the hard one at start.
func requireFileDescriptors(t *testing.T, n uint64) {
	t.Helper()
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	if limit.Max < n {
		t.Fatalf("this test needs %d open files per process and the hard limit is %d: raise it (ulimit -Hn %d, or LimitNOFILE= for a service)", n, limit.Max, n)
	}
}

// flood holds conns connections to server from the loopback address source, reopening each one
// the server drops within a second. Each sends one GET /healthz, reads the answer and falls
// silent; or, with slowHeaders, sends its request line and then a header line a second, never
// ending its headers. One goroutine tends them all, so that thousands cost the test little.
type flood struct {
	server      string
	source      string
	conns       int
	slowHeaders bool

	opened  atomic.Int64 // connections opened
	dropped atomic.Int64 // connections found closed by the server
}

func (f *flood) run(ctx context.Context) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(f.source)}, Timeout: 5 * time.Second}
	held := make([]net.Conn, f.conns)
	defer func() {
		for _, c := range held {
			if c != nil {
				c.Close()
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for i := range held {
			if ctx.Err() != nil {
				return
			}
			if held[i] != nil && !f.tend(held[i]) {
				held[i].Close()
				held[i] = nil
				f.dropped.Add(1)
			}
			if held[i] == nil {
				held[i] = f.open(ctx, dialer)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// open opens a connection and starts its request, returning nil if the server closed it first.
func (f *flood) open(ctx context.Context, dialer *net.Dialer) net.Conn {
	c, err := dialer.DialContext(ctx, "tcp", f.server)
	if err != nil {
		return nil
	}
	f.opened.Add(1)
	if f.slowHeaders {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\n"); err != nil {
			c.Close()
			return nil
		}
		return c
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n"); err != nil {
		c.Close()
		return nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.SetDeadline(time.Time{})
	return c
}

// tend sends a slow connection's next header line, and reports whether c is still open: a read
// that times out finds it so, one that returns finds it closed.
func (f *flood) tend(c net.Conn) bool {
	if f.slowHeaders {
		if _, err := io.WriteString(c, "X-Slow: 1\r\n"); err != nil {
			return false
		}
	}
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}
