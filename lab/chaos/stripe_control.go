package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/invariants"
)

// stripeControl drives the Stripe stand-in's control API (internal/testing/fakestripe/control.go) from
// this process: queue faults, set latency, refund and dispute charges as the dashboard and a
// rider's bank would, shape webhook deliveries, and list the charges, refunds and events.
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

// injectRefundFaults queues count faults of kind for refunds; each strikes one of the next refund
// requests, in order.
func (c *stripeControl) injectRefundFaults(ctx context.Context, kind string, count int) error {
	return c.post(ctx, "faults", map[string]any{"kind": kind, "count": count, "on": "refunds"})
}

// setLatency delays every Stripe API request by d.
func (c *stripeControl) setLatency(ctx context.Context, d time.Duration) error {
	return c.post(ctx, "latency", map[string]any{"ms": d.Milliseconds()})
}

// pendingFaults returns the faults still queued, for charges and for refunds.
func (c *stripeControl) pendingFaults(ctx context.Context) (charges, refunds []string, err error) {
	var res struct {
		PendingFaults       []string `json:"pending_faults"`
		PendingRefundFaults []string `json:"pending_refund_faults"`
	}
	if err := c.get(ctx, "faults", &res); err != nil {
		return nil, nil, err
	}
	return res.PendingFaults, res.PendingRefundFaults, nil
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

// refunds returns every refund Stripe holds, or those of chargeID if it is not empty.
func (c *stripeControl) refunds(ctx context.Context, chargeID string) ([]invariants.Refund, error) {
	var res struct {
		Refunds []invariants.Refund `json:"refunds"`
	}
	path := "refunds"
	if chargeID != "" {
		path += "?charge=" + url.QueryEscape(chargeID)
	}
	if err := c.get(ctx, path, &res); err != nil {
		return nil, err
	}
	return res.Refunds, nil
}

// errRefused is a dashboard action that Stripe refused because of the charge's state: refunded
// or disputed already. The soak picks charges at random, and some are.
var errRefused = errors.New("refused by Stripe")

// refundCharge refunds chargeID in full from the dashboard, and returns the refund's id.
func (c *stripeControl) refundCharge(ctx context.Context, chargeID string) (string, error) {
	var res struct {
		ID string `json:"id"`
	}
	if err := c.postInto(ctx, "charges/"+url.PathEscape(chargeID)+"/refund", struct{}{}, &res); err != nil {
		return "", err
	}
	return res.ID, nil
}

// disputeCharge has the rider's bank dispute chargeID.
func (c *stripeControl) disputeCharge(ctx context.Context, chargeID string) error {
	return c.postInto(ctx, "charges/"+url.PathEscape(chargeID)+"/dispute", struct{}{}, nil)
}

// webhookBehavior is how deliveries of events to come misbehave (fakestripe.WebhookBehavior).
type webhookBehavior struct {
	Duplicate       int   `json:"duplicate"`
	Reorder         bool  `json:"reorder"`
	ReorderWindowMS int64 `json:"reorder_window_ms"`
}

// setWebhookBehavior sets how deliveries of events to come misbehave; the zero value delivers
// each once, in order, and sends any event held back for reordering at once.
func (c *stripeControl) setWebhookBehavior(ctx context.Context, b webhookBehavior) error {
	return c.post(ctx, "webhooks", b)
}

// webhookEvents returns every event Stripe emitted, as the Stripe Event objects it delivers.
func (c *stripeControl) webhookEvents(ctx context.Context) ([]json.RawMessage, error) {
	var res struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := c.get(ctx, "webhooks", &res); err != nil {
		return nil, err
	}
	return res.Events, nil
}

func (c *stripeControl) post(ctx context.Context, path string, body any) error {
	return c.postInto(ctx, path, body, nil)
}

func (c *stripeControl) postInto(ctx context.Context, path string, body, into any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("error encoding control request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/_fakestripe/"+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("error building control request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, into)
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
	if resp.StatusCode == http.StatusConflict {
		return fmt.Errorf("%w: %s %s: %s", errRefused, req.Method, req.URL.Path, body)
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
