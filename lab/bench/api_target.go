package main

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// apiTarget is the API as a target of the comparison: cmd/api, built once and started afresh
// for each run, on the api database.
type apiTarget struct {
	binary  string
	logPath string
	db      *benchCluster
	standIn *standIn
	tokens  []string // of the bench riders, client i's at i
	opts    *options
}

// newAPITarget is the API built in workDir, on db's api database.
func newAPITarget(workDir string, db *benchCluster, standIn *standIn, tokens []string, opts *options) *apiTarget {
	return &apiTarget{
		binary:  filepath.Join(workDir, "api"),
		logPath: filepath.Join(workDir, "api.log"),
		db:      db,
		standIn: standIn,
		tokens:  tokens,
		opts:    opts,
	}
}

// run starts the API, loads it with one client per bench rider for duration, and stops it.
// Stopping it ends its sessions, which is when Postgres counts what they did.
func (a *apiTarget) run(ctx context.Context, clients int, duration time.Duration) (m *measurement, err error) {
	databaseURL := a.db.url(dbAPI)
	if a.opts.apiPoolConns > 0 {
		databaseURL += "&pool_max_conns=" + strconv.Itoa(a.opts.apiPoolConns)
	}
	env := []string{
		"DATABASE_URL=" + databaseURL,
		"STRIPE_API_KEY=" + standInKey,
		"API_TOKEN_SECRET=" + tokenSecret,
		"STRIPE_API_URL=" + a.standIn.url,
		"LOG_LEVEL=warn",  // one log line per request would be part of what is measured
		"RATE_LIMITS=off", // a load test: the riders book far faster than riders do
	}
	var metricsURL string
	if a.db.cpu != nil {
		port, err := supervisor.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		env, metricsURL = append(env, "METRICS_ADDR="+addr), "http://"+addr+"/metrics"
	}
	proc, err := startAPI(ctx, a.binary, a.logPath, env)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, proc.stop()) }()

	before, err := a.db.startRun(ctx, dbAPI)
	if err != nil {
		return nil, err
	}
	var meter *apiMeter
	if a.db.cpu != nil {
		if meter, err = a.db.cpu.beginAPI(ctx, proc.cmd.Process.Pid, metricsURL); err != nil {
			return nil, err
		}
	}
	httpClient, counter := newHTTPClient(clients)
	riders := make([]*client.Client, clients)
	for i := range riders {
		riders[i] = &client.Client{BaseURL: proc.url, Token: a.tokens[i], HTTPClient: httpClient, MaxElapsed: a.opts.giveUpAfter}
	}
	res := load(ctx, riders, counter, duration, 0, 0)
	if meter != nil {
		if err := meter.endLoad(ctx); err != nil {
			return nil, err
		}
	}
	m = &measurement{
		api:            res,
		rides:          int64(res.booked),
		elapsed:        res.elapsed,
		ridesPerSecond: float64(res.booked) / res.elapsed.Seconds(),
	}
	if latencies := slices.Sorted(slices.Values(res.latencies[kindNew])); len(latencies) > 0 {
		m.p50, m.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	}
	if m.connections, err = a.db.sessions(ctx, dbAPI); err != nil {
		return nil, err
	}

	if err := proc.stop(); err != nil {
		return nil, err
	}
	if err := a.db.endRun(ctx, dbAPI, before, m); err != nil {
		return nil, err
	}
	if meter != nil {
		if m.cpu, err = meter.end(); err != nil {
			return nil, err
		}
	}
	return m, nil
}
