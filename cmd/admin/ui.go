package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/cli"
)

// uiHostDefault is where admin ui listens when UI_ADDR is unset: loopback, since River's UI can
// retry, cancel and delete jobs, and a person must choose to open it to a network.
const uiHostDefault = "127.0.0.1"

// serveUI serves River's UI, its pages and its JSON API, until SIGINT or SIGTERM: the jobs of
// every state with their args, errors and attempts, and buttons that retry, cancel or delete
// them. It is the list-failed-jobs and retry-job of River's jobs with a browser; staged jobs,
// abandoned requests and disputes are outside River, and only admin's commands list them.
func serveUI(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return &cli.UsageError{Err: fmt.Errorf("ui: takes no arguments, got %q: it reads UI_ADDR, UI_USERNAME, UI_PASSWORD and UI_PATH_PREFIX", args)}
	}
	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	setting, addr := "UI_ADDR", cfg.UIAddr
	if addr == "" {
		setting, addr = "PORT", net.JoinHostPort(uiHostDefault, strconv.Itoa(cfg.Port))
	}
	// Refused before the database is opened: an open UI is the one mistake here worth a failed start.
	if err := checkUIAccess(ctx, addr, cfg.UIUsername, cfg.UIPassword); err != nil {
		return err
	}

	logger, pool, err := bootstrap.Open(ctx, cfg, os.Stdout)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := bootstrap.CheckRiverSchema(ctx, pool); err != nil {
		return err
	}
	// With no queues, the client works no jobs and runs none of River's maintenance: the UI
	// reads and changes jobs, and the worker alone runs them.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("error creating River client: %w", err)
	}
	handler, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    cfg.UIPathPrefix,
	})
	if err != nil {
		return fmt.Errorf("error creating River's UI: %w", err)
	}
	if err := handler.Start(ctx); err != nil {
		return fmt.Errorf("error starting River's UI: %w", err)
	}

	listener, err := bootstrap.Listen(setting, addr)
	if err != nil {
		return err
	}
	logger.InfoContext(ctx, "UI: serving River's UI",
		slog.String("url", "http://"+listener.Addr().String()+cfg.UIPathPrefix+"/"),
		slog.Bool("basic_auth", cfg.UIUsername != ""))
	return bootstrap.ServeHTTP(ctx, listener, requireBasicAuth(handler, cfg.UIUsername, cfg.UIPassword), nil, logger, nil)
}

// checkUIAccess refuses a UI that anyone on a network could use: one on an address beyond
// loopback needs UI_USERNAME and UI_PASSWORD. It also refuses half a login, and a user name
// that basic auth cannot carry.
func checkUIAccess(ctx context.Context, addr, username, password string) error {
	if (username == "") != (password == "") {
		return errors.New("invalid configuration: UI_USERNAME and UI_PASSWORD go together: set both, or neither for a UI on loopback")
	}
	if strings.Contains(username, ":") {
		return errors.New("invalid configuration: UI_USERNAME must not contain a colon, which basic auth puts between user name and password")
	}
	if username != "" {
		return nil
	}
	loopback, err := isLoopback(ctx, addr)
	if err != nil {
		return err
	}
	if !loopback {
		return fmt.Errorf("invalid configuration: River's UI would listen on %s, beyond loopback, with no login: "+
			"set UI_USERNAME and UI_PASSWORD, which it then asks every request for, or a loopback UI_ADDR such as 127.0.0.1:5504", addr)
	}
	return nil
}

// isLoopback reports whether every address that addr's host names is a loopback one. An empty
// host is every interface of the machine.
func isLoopback(ctx context.Context, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("UI_ADDR %q: %w", addr, err)
	}
	if host == "" {
		return false, nil
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
		return false, fmt.Errorf("error resolving UI_ADDR's host %q: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}
