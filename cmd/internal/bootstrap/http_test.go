package bootstrap

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServeHTTPLimits(t *testing.T) {
	t.Parallel()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	go ServeHTTP(ctx, listener, ok, nil, slog.New(slog.DiscardHandler), nil)
	addr := listener.Addr().String()

	// request sends one request on a new connection and returns the status line, or "" if no
	// answer came within wait.
	request := func(header string, wait time.Duration) (net.Conn, string) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", header)
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return conn, strings.TrimSpace(line)
	}

	t.Run("HeadersOverTheLimitAre431", func(t *testing.T) {
		conn, status := request("X-Big: "+strings.Repeat("a", 100<<10)+"\r\n", 5*time.Second)
		defer conn.Close()
		if !strings.Contains(status, "431") {
			t.Fatalf("want 431 for a 100 KB header, got %q", status)
		}
		conn, status = request("X-Fine: "+strings.Repeat("a", 8<<10)+"\r\n", 5*time.Second)
		defer conn.Close()
		if !strings.Contains(status, "204") {
			t.Fatalf("want an 8 KB header served, got %q", status)
		}
	})
}
