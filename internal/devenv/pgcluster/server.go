package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// server is one run of the postgres process.
type server struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait has returned
	err    error         // what cmd.Wait returned; read only after exited is closed
}

func (s *server) hasExited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// StartServer starts the server on the cluster's data, returning once it accepts connections.
func (c *Cluster) StartServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server != nil && !c.server.hasExited() {
		return errors.New("error starting postgres: already running")
	}

	listen := ""
	port := socketOnlyPort
	if c.port != 0 {
		listen, port = "localhost", c.port
	}
	args := []string{
		"-D", c.dataDir,
		"-k", c.runDir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=" + listen,
	}
	for _, name := range slices.Sorted(maps.Keys(c.settings)) {
		args = append(args, "-c", name+"="+c.settings[name])
	}

	start := time.Now()
	// Not CommandContext: the server outlives the ctx of the call that starts it.
	cmd := c.command(context.Background(), "postgres", args...)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("error starting postgres: %w", err)
	}
	srv := &server{cmd: cmd, exited: make(chan struct{})}
	go func() {
		srv.err = cmd.Wait()
		close(srv.exited)
	}()

	if err := c.waitReady(ctx, srv); err != nil {
		_ = cmd.Process.Kill()
		<-srv.exited
		return fmt.Errorf("error starting postgres: %w; its log ends with:\n%s", err, c.log.Tail())
	}
	c.server = srv
	c.logger.InfoContext(ctx, "Postgres: started",
		slog.String("url", c.URL("postgres")), slog.Duration("duration", time.Since(start)))
	return nil
}

// StopServer stops the server with a fast shutdown (open sessions are ended, the data is kept),
// and waits for it to exit. Should ctx end first, the server is killed.
func (c *Cluster) StopServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	srv := c.server
	if srv == nil {
		return nil
	}
	c.server = nil

	// SIGINT is Postgres's fast shutdown; SIGTERM (smart) would wait for every client to leave.
	if err := srv.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("error stopping postgres: %w", err)
	}
	select {
	case <-srv.exited:
	case <-ctx.Done():
		_ = srv.cmd.Process.Kill()
		<-srv.exited
		return fmt.Errorf("error stopping postgres, killed it: %w", ctx.Err())
	}
	if srv.err != nil {
		return fmt.Errorf("error stopping postgres: %w; its log ends with:\n%s", srv.err, c.log.Tail())
	}
	c.logger.InfoContext(ctx, "Postgres: stopped", slog.String("data_dir", c.dataDir))
	return nil
}

// Restart stops the server and starts it again on the same data and the same URL.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.StopServer(ctx); err != nil {
		return err
	}
	return c.StartServer(ctx)
}
