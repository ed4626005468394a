package fakestripe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"
)

// Defaults and bounds of webhook delivery.
const (
	defaultWebhookRetryBase = 100 * time.Millisecond
	defaultWebhookRetryMax  = 5 * time.Second

	// webhookAttemptTimeout bounds one delivery attempt, as Stripe's own timeout does.
	webhookAttemptTimeout = 10 * time.Second

	// maxRecordedDeliveries bounds the record of attempts, which retries to an endpoint that is
	// down would grow without end in a long-running process.
	maxRecordedDeliveries = 10_000

	// maxWebhookAnswer is how much of an endpoint's answer is read, for the connection's reuse.
	maxWebhookAnswer = 64 << 10
)

// webhooks records a Server's events and delivers them to its webhook endpoint. One goroutine,
// started with the first event to deliver and stopped by close, makes the attempts one at a
// time, in the order they fall due; an attempt that fails is queued again after its backoff, so
// it holds up no other event. The events and the record of attempts live in memory only.
type webhooks struct {
	url, secret         string
	retryBase, retryMax time.Duration
	client              *http.Client
	logger              *slog.Logger

	ctx    context.Context // ends with close, and every attempt with it
	cancel context.CancelFunc
	wake   chan struct{} // tells the deliverer the queue changed; one signal pending is enough
	done   sync.WaitGroup

	mu            sync.Mutex
	started       bool
	closed        bool
	behavior      WebhookBehavior
	events        []WebhookEvent
	deliveries    []WebhookDelivery
	queue         []*pendingDelivery // by due time, then the order queued
	held          []WebhookEvent     // by WebhookBehavior.Reorder, oldest first
	heldSince     time.Time
	generation    int                // bumped by reset, which forgets what was queued or in flight
	cancelAttempt context.CancelFunc // of the attempt in flight, nil if none
}

// pendingDelivery is one copy of an event waiting for its next attempt.
type pendingDelivery struct {
	event      WebhookEvent
	copy       int
	attempts   int // made so far
	due        time.Time
	generation int
}

func newWebhooks(opts Options, logger *slog.Logger) *webhooks {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhooks{
		url:       opts.WebhookURL,
		secret:    opts.WebhookSecret,
		retryBase: positiveOr(opts.WebhookRetryBase, defaultWebhookRetryBase),
		retryMax:  positiveOr(opts.WebhookRetryMax, defaultWebhookRetryMax),
		client: &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			Timeout:   webhookAttemptTimeout,
			// Stripe follows no redirect: a 3xx is a failed delivery.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		logger: logger,
		ctx:    ctx,
		cancel: cancel,
		wake:   make(chan struct{}, 1),
	}
}

func positiveOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// endpoints is how many webhook endpoints an event goes to: Stripe's pending_webhooks when it
// is emitted.
func (wh *webhooks) endpoints() int {
	if wh.url == "" {
		return 0
	}
	return 1
}

// add records ev and, with an endpoint, queues its deliveries (or holds it, to reorder).
func (wh *webhooks) add(ev WebhookEvent) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.events = append(wh.events, ev)
	if wh.url == "" || wh.closed {
		return
	}
	if !wh.started {
		wh.started = true
		wh.done.Add(1)
		go wh.run()
	}

	now := time.Now()
	if !wh.behavior.Reorder {
		wh.queueLocked(now, ev)
	} else {
		if len(wh.held) == 0 {
			wh.heldSince = now
		}
		wh.held = append(wh.held, ev)
		if len(wh.held) >= reorderBatch {
			wh.releaseHeldLocked(now)
		}
	}
	wh.signal()
}

// queueLocked queues each event's deliveries, duplicates included, in the order given. The
// caller holds wh.mu.
func (wh *webhooks) queueLocked(now time.Time, events ...WebhookEvent) {
	due := now.Add(wh.behavior.Delay)
	for _, ev := range events {
		for c := range wh.behavior.Duplicate + 1 {
			wh.pushLocked(&pendingDelivery{event: ev, copy: c, due: due, generation: wh.generation})
		}
	}
}

// releaseHeldLocked queues the events Reorder holds, newest first. The caller holds wh.mu.
func (wh *webhooks) releaseHeldLocked(now time.Time) {
	slices.Reverse(wh.held)
	wh.queueLocked(now, wh.held...)
	wh.held = nil
}

// pushLocked queues d in order of due time, after those due at the same time. The caller holds
// wh.mu.
func (wh *webhooks) pushLocked(d *pendingDelivery) {
	i := len(wh.queue)
	for i > 0 && wh.queue[i-1].due.After(d.due) {
		i--
	}
	wh.queue = slices.Insert(wh.queue, i, d)
}

// signal wakes the deliverer, if it sleeps, to look at the queue again.
func (wh *webhooks) signal() {
	select {
	case wh.wake <- struct{}{}:
	default: // a signal is pending already
	}
}

// run makes delivery attempts until close.
func (wh *webhooks) run() {
	defer wh.done.Done()
	for wh.ctx.Err() == nil {
		d, wait := wh.next(time.Now())
		if d == nil {
			wh.sleep(wait)
			continue
		}
		wh.deliver(d)
	}
}

// next takes the first delivery due by now, once a reorder batch whose window has passed is
// released. If none is due, it returns how long until one may be, or -1 if nothing is pending.
func (wh *webhooks) next(now time.Time) (*pendingDelivery, time.Duration) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wait := time.Duration(-1)
	if len(wh.held) > 0 {
		release := wh.heldSince.Add(positiveOr(wh.behavior.ReorderWindow, defaultReorderWindow))
		if !now.Before(release) {
			wh.releaseHeldLocked(now)
		} else {
			wait = release.Sub(now)
		}
	}
	if len(wh.queue) == 0 {
		return nil, wait
	}
	d := wh.queue[0]
	if !d.due.After(now) {
		wh.queue = wh.queue[1:]
		return d, 0
	}
	if until := d.due.Sub(now); wait < 0 || until < wait {
		wait = until
	}
	return nil, wait
}

// sleep waits for wait (forever if negative), a signal, or close.
func (wh *webhooks) sleep(wait time.Duration) {
	var timeout <-chan time.Time
	if wait >= 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-wh.ctx.Done():
	case <-wh.wake:
	case <-timeout:
	}
}

// deliver makes one attempt at d, records it and, if it failed, queues d again after its
// backoff. An attempt that reset or close overtook is forgotten.
func (wh *webhooks) deliver(d *pendingDelivery) {
	ctx, cancel := context.WithCancel(wh.ctx)
	defer cancel()
	wh.mu.Lock()
	if d.generation != wh.generation || wh.closed {
		wh.mu.Unlock()
		return
	}
	wh.cancelAttempt = cancel
	wh.mu.Unlock()

	d.attempts++
	status, err := wh.post(ctx, d.event)

	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.cancelAttempt = nil
	if d.generation != wh.generation || wh.closed {
		return
	}
	wh.recordLocked(d, status, err)
	if err != nil {
		d.due = time.Now().Add(wh.backoff(d.attempts))
		wh.pushLocked(d)
	}
}

// post sends ev to the endpoint once, signed afresh as Stripe signs each attempt, and returns
// the status answered; an error if the endpoint did not answer 2xx.
func (wh *webhooks) post(ctx context.Context, ev WebhookEvent) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.url, bytes.NewReader(ev.Payload))
	if err != nil {
		return 0, fmt.Errorf("error building the delivery of event %s: %w", ev.ID, err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: ev.Payload, Secret: wh.secret, Timestamp: time.Now(),
	})
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", signed.Header)
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")

	res, err := wh.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("error delivering event %s: %w", ev.ID, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxWebhookAnswer)) // only for reuse
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, fmt.Errorf("endpoint answered %s", res.Status)
	}
	return res.StatusCode, nil
}

// recordLocked records an attempt at d and logs it. The caller holds wh.mu.
func (wh *webhooks) recordLocked(d *pendingDelivery, status int, err error) {
	rec := WebhookDelivery{
		EventID: d.event.ID, EventType: d.event.Type, Copy: d.copy, Attempt: d.attempts,
		Status: status, Delivered: err == nil, Time: time.Now(),
	}
	level := slog.LevelInfo
	if err != nil {
		rec.Error = err.Error()
		level = slog.LevelWarn
	}
	wh.deliveries = append(wh.deliveries, rec)
	if over := len(wh.deliveries) - maxRecordedDeliveries; over > 0 {
		wh.deliveries = slices.Delete(wh.deliveries, 0, over)
	}
	wh.logger.Log(context.Background(), level, "Fakestripe: attempted webhook delivery",
		slog.String("event_id", rec.EventID),
		slog.String("type", rec.EventType),
		slog.Int("copy", rec.Copy),
		slog.Int("attempt", rec.Attempt),
		slog.Int("status", rec.Status),
		slog.Bool("delivered", rec.Delivered),
		slog.String("error", rec.Error))
}

// backoff is the wait after the given number of failed attempts: retryBase, doubled for each
// attempt after the first, at most retryMax.
func (wh *webhooks) backoff(attempts int) time.Duration {
	wait := wh.retryBase
	for range attempts - 1 {
		if wait >= wh.retryMax/2 {
			return wh.retryMax
		}
		wait *= 2
	}
	return min(wait, wh.retryMax)
}

// setBehavior sets how coming deliveries behave. Events Reorder holds are sent once it is off.
func (wh *webhooks) setBehavior(b WebhookBehavior) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.behavior = b
	if !b.Reorder && len(wh.held) > 0 {
		wh.releaseHeldLocked(time.Now())
	}
	wh.signal()
}

// reset forgets every event, attempt and pending delivery, abandons the attempt in flight and
// restores the default behaviour.
func (wh *webhooks) reset() {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.generation++
	wh.events, wh.deliveries, wh.queue, wh.held = nil, nil, nil, nil
	wh.behavior = WebhookBehavior{}
	if wh.cancelAttempt != nil {
		wh.cancelAttempt()
	}
}

// close stops delivering: the attempt in flight is abandoned, and close returns once the
// deliverer has stopped. Events added later are recorded only.
func (wh *webhooks) close() {
	wh.mu.Lock()
	wh.closed = true
	wh.queue, wh.held = nil, nil
	wh.mu.Unlock()
	wh.cancel()
	wh.done.Wait()
	wh.client.CloseIdleConnections()
}
