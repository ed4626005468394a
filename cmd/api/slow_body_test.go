package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// slowBodyRequest is a booking's headers; its body follows a byte at a time.
const slowBodyRequest = "POST /rides HTTP/1.1\r\nHost: api\r\n%sIdempotency-Key: slow-body-%d-0123456789\r\n" +
	"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 59\r\n\r\no"

// TestSlowBodies holds 150 connections from the rider's own address that send a booking's
// headers and then a byte of its body every 2 s, each reopened as soon as the API drops it: a
// fifth with no token, the rest with another rider's, whose bookings reach their bodies and fill
// the address's 100 connections. The rider books every time, a connection the API refused
// retried once, and slow senders are shed at the address's cap.
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	// The other rider's budget lets all its slow bookings in.
	s := setup(t, "METRICS_ADDR=127.0.0.1:0", "RIDER_RIDES_IN_FLIGHT=1000",
		"RIDER_RIDES_PER_MINUTE=60000", "RIDER_RIDE_BURST=1000", "RIDER_REQUESTS_PER_MINUTE=60000", "RIDER_REQUEST_BURST=1000")
	metricsURL := proctest.MetricsURL(t, s.api)
	other := s.createRider(t, "other@example.com")
	server := strings.TrimPrefix(s.base, "http://")

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var opened, dropped atomic.Int64
	for i := range 150 {
		// Every fifth sends no token, and is answered 401 at once: it reconnects a second later.
		auth, reconnectAfter := "", time.Second
		if i%5 != 0 {
			auth, reconnectAfter = "Authorization: Bearer "+other+"\r\n", 100*time.Millisecond
		}
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				opened.Add(1)
				trickleBody(ctx, server, fmt.Sprintf(slowBodyRequest, auth, i*1_000_000+n))
				dropped.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(reconnectAfter):
				}
			}
		})
	}
	waitFor(t, 30*time.Second, "150 slow connections", func() bool { return opened.Load() >= 150 })

	// The rider books ten times over 10 s, longer than three of the API's body deadlines.
	retried := s.bookTimes(t, "127.0.0.1", "slow-bodies", 10)
	text := proctest.Scrape(t, metricsURL)
	shed, _ := proctest.MetricValue(text, `rocketrides_http_connections_shed_total{reason="oldest_of_address"}`)
	t.Logf("rider: 10 bookings, %d retried; slow senders: %d connections opened, %d dropped by the API, %v shed at the address's cap",
		retried, opened.Load(), dropped.Load(), shed)
	if shed <= 0 {
		t.Errorf("want slow body senders shed at the address's cap, got %v", shed)
	}
}

// trickleBody opens a connection, sends request, then a byte every 2 s until the API drops the
// connection or ctx ends.
func trickleBody(ctx context.Context, server, request string) {
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", server)
	if err != nil {
		return
	}
	defer c.Close()
	context.AfterFunc(ctx, func() { c.Close() })
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c) // until the API closes the connection
		close(closed)
	}()
	if _, err := io.WriteString(c, request); err != nil {
		return
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return
		case <-tick.C:
			if _, err := io.WriteString(c, "&"); err != nil {
				return
			}
		}
	}
}

// TestUnauthenticatedBodyNeverSent sends a booking with no token and a body that never comes:
// the 401 comes without the body, and the connection is closed rather than held for the rest of
// it, long before the server's 30 s read timeout.
func TestUnauthenticatedBodyNeverSent(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, slowBodyRequest, "", 0)
	c.SetReadDeadline(start.Add(15 * time.Second)) // half the read timeout: generous for a busy machine
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("want a 401 while the body is still to come, got %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("want 401 and the connection closed, got %d (close %t) %s", resp.StatusCode, resp.Close, body)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("want the connection closed after the 401, got %v", err)
	}
	t.Logf("401 after %s, with 58 of the body's 59 bytes never sent", time.Since(start).Round(time.Millisecond))
}

// createRider makes another rider with admin create-user and returns its token.
func (s *testBundle) createRider(t *testing.T, email string) string {
	t.Helper()
	env := []string{"DATABASE_URL=" + s.databaseURL, "STRIPE_API_KEY=sk_test_readme", "STRIPE_API_URL=" + s.stripeURL,
		"API_TOKEN_SECRET=" + ridetest.TokenSecret}
	out, errOut, code := proctest.Run(t, proctest.Build(t, "admin"), env, "create-user", "-email", email, "-card", "tok_visa")
	if code != 0 {
		t.Fatalf("admin create-user exited %d: %s", code, errOut)
	}
	var user struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &user); err != nil {
		t.Fatal(err)
	}
	return user.Token
}

// bookTimes has the rider book n rides from source, a second apart, each on a new connection
// and retried once if the API refused the connection, and returns how many were retried. Any
// other failure fails the test.
func (s *testBundle) bookTimes(t *testing.T, source, name string, n int) (retried int) {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	rider := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	for i := range n {
		book := func() (int, []byte, error) {
			req, _ := http.NewRequest(http.MethodPost, s.base+"/rides",
				strings.NewReader("origin_lat=0.0&origin_lon=0.0&target_lat=1.0&target_lon=1.0"))
			req.Header.Set("Authorization", "Bearer "+s.token)
			req.Header.Set("Idempotency-Key", fmt.Sprintf("rider-%s-%d-0123456789", name, i))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := rider.Do(req)
			if err != nil {
				return 0, nil, err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return resp.StatusCode, body, err
		}
		// As the app does: a dropped connection, or the 409 of the dropped attempt still in
		// progress (the API sheds a connection, not the request it serves), is asked again
		// with the same key; a loaded machine can take a few of those.
		status, body, err := book()
		for try := 1; try < bookTries && (err != nil || status == http.StatusConflict && strings.Contains(string(body), `"idempotency_key_in_use"`)); try++ {
			retried++
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
			status, body, err = book()
		}
		if err != nil {
			t.Fatalf("booking %d: want it made, asked %d times, got %v", i, bookTries, err)
		}
		if status != http.StatusCreated {
			t.Fatalf("booking %d: want 201, got %d %s", i, status, body)
		}
		time.Sleep(time.Second)
	}
	return retried
}

// TestFloodOfBadTokens has four keep-alive clients on the rider's own address send bookings
// with made-up tokens as fast as they are answered, in both the current format and the one of
// tokens before they carried a MAC. The rider books every time, and every made-up token is a
// 401.
func TestFloodOfBadTokens(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const source = "127.0.0.93"
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var sent, unauthorized atomic.Int64
	var other sync.Map // status -> count, for anything but 401
	for i := range 4 {
		wg.Go(func() {
			dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
			client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
			for n := 0; ctx.Err() == nil; n++ {
				random := make([]byte, 32+16*((i+n)%2)) // the old format and the new
				rand.Read(random)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/rides",
					strings.NewReader("origin_lat=0.0&origin_lon=0.0&target_lat=1.0&target_lon=1.0"))
				req.Header.Set("Authorization", "Bearer rr_"+base64.RawURLEncoding.EncodeToString(random))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("flood-%d-%d-0123456789", i, n))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent.Add(1)
				if resp.StatusCode == http.StatusUnauthorized {
					unauthorized.Add(1)
				} else {
					v, _ := other.LoadOrStore(resp.StatusCode, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			}
		})
	}
	waitFor(t, 30*time.Second, "the flood to start", func() bool { return sent.Load() >= 100 })
	retried := s.bookTimes(t, source, "bad-tokens", 10)
	stop()
	wg.Wait()
	t.Logf("rider: 10 bookings, %d retried; flood: %d made-up tokens sent, %d answered 401", retried, sent.Load(), unauthorized.Load())
	other.Range(func(status, n any) bool {
		t.Errorf("want every made-up token answered 401, got %d answered %v", n.(*atomic.Int64).Load(), status)
		return true
	})
}

// bookTries is how many times bookTimes asks for one booking, as the app would before it told
// the rider to try later.
const bookTries = 10
