package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/invariants"
)

// stripeControl drives the Stripe stand-in's control API (internal/testing/fakestripe/control.go) from
// this process: queue faults, set latency, list the charges.
type stripeControl struct {
	baseURL string
	http    *http.Client
}

func newStripeControl(baseURL string) *stripeControl {
	return &stripeControl{baseURL: baseURL, http: &http.Client{Timeout: 10 * time.Second}}
}

// injectFaults queues count faults of kind (error_500, timeout, charge_then_drop, ...); each
// strikes one of the next charge requests, in order.
func (c *stripeControl) injectFaults(ctx context.Context, kind string, count int) error {
	return c.post(ctx, "faults", map[string]any{"kind": kind, "count": count})
}

// setLatency delays every Stripe API request by d.
func (c *stripeControl) setLatency(ctx context.Context, d time.Duration) error {
	return c.post(ctx, "latency", map[string]any{"ms": d.Milliseconds()})
}

// pendingFaults returns the faults still queued.
func (c *stripeControl) pendingFaults(ctx context.Context) ([]string, error) {
	var res struct {
		PendingFaults []string `json:"pending_faults"`
	}
	if err := c.get(ctx, "faults", &res); err != nil {
		return nil, err
	}
	return res.PendingFaults, nil
}

// charges returns every charge Stripe holds, and how many charge requests it received.
func (c *stripeControl) charges(ctx context.Context) ([]invariants.Charge, int, error) {
	var res struct {
		ChargeRequests int                 `json:"charge_requests"`
		Charges        []invariants.Charge `json:"charges"`
	}
	if err := c.get(ctx, "charges", &res); err != nil {
		return nil, 0, err
	}
	return res.Charges, res.ChargeRequests, nil
}

func (c *stripeControl) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("error encoding control request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/_fakestripe/"+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("error building control request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, nil)
}

func (c *stripeControl) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/_fakestripe/"+path, nil)
	if err != nil {
		return fmt.Errorf("error building control request: %w", err)
	}
	return c.do(req, into)
}

func (c *stripeControl) do(req *http.Request, into any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("error calling the Stripe stand-in's control API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("error reading the Stripe stand-in's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the Stripe stand-in's control API answered %s to %s %s: %s", resp.Status, req.Method, req.URL.Path, body)
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("error decoding the Stripe stand-in's answer: %w", err)
	}
	return nil
}
