package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// standIn is the Stripe stand-in, served from this process on a loopback port. It answers after
// latency: at once for the comparison, which measures what the API adds to its SQL, not Stripe.
type standIn struct {
	fake   *fakestripe.Server
	server *http.Server
	url    string
}

func startStandIn(latency time.Duration) (*standIn, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("error listening for the Stripe stand-in: %w", err)
	}
	s := &standIn{
		fake: fakestripe.New(fakestripe.Options{}),
		url:  "http://" + listener.Addr().String(),
	}
	s.fake.SetLatency(latency)
	s.server = &http.Server{Handler: s.fake, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.server.Serve(listener) }() // ErrServerClosed once stopped
	return s, nil
}

func (s *standIn) stop() {
	s.fake.Close()
	_ = s.server.Close()
}
