package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// standIn is the Stripe stand-in, on a loopback port: served from this process, or run as a
// process of its own (cmd/fakestripe), whose CPU time the comparison can then tell from the
// load generator's. It answers after latency: at once for the comparisons, which measure what
// the API adds to its SQL, not Stripe.
type standIn struct {
	url string

	// In this process.
	fake   *fakestripe.Server
	server *http.Server

	// As a process of its own.
	proc *process
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

// startStandInProcess runs cmd/fakestripe, built in workDir, on a free loopback port, answering
// at once, and returns once it answers.
func startStandInProcess(ctx context.Context, workDir string) (*standIn, error) {
	port, err := supervisor.FreePort()
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	proc, err := startProcess("the Stripe stand-in", filepath.Join(workDir, "fakestripe"), filepath.Join(workDir, "fakestripe.log"),
		[]string{"STRIPE_API_URL=" + url, "LOG_LEVEL=warn"})
	if err != nil {
		return nil, err
	}
	err = supervisor.WaitOK(ctx, url+fakestripe.ControlPathPrefix+"faults", apiStartTimeout, func() error {
		select {
		case <-proc.done:
			return fmt.Errorf("the Stripe stand-in exited while starting (%s); its log ends with:\n%s", proc.cmd.ProcessState, proc.logTail())
		default:
			return nil
		}
	})
	if err != nil {
		return nil, errors.Join(err, proc.stop())
	}
	return &standIn{url: url, proc: proc}, nil
}

// pid is the stand-in's process id when it runs as a process of its own, else 0.
func (s *standIn) pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

func (s *standIn) stop() error {
	if s.proc != nil {
		return s.proc.stop()
	}
	s.fake.Close()
	_ = s.server.Close()
	return nil
}
