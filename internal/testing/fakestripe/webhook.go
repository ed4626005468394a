package fakestripe

import (
	"encoding/json"
	"slices"
	"time"
)

// The event types the stand-in emits, each with the object Stripe puts in its data.object.
const (
	// EventChargeSucceeded is emitted for every charge that succeeds; its object is the charge.
	EventChargeSucceeded = "charge.succeeded"

	// EventChargeRefunded is emitted for every refund, in part or in full, through the API or the
	// dashboard (RefundCharge); its object is the charge, with amount_refunded, refunded (true
	// once refunded in full) and its refunds.
	EventChargeRefunded = "charge.refunded"

	// EventChargeDisputeCreated is emitted for every dispute (DisputeCharge); its object is the
	// dispute, whose charge is the charge's ID.
	EventChargeDisputeCreated = "charge.dispute.created"
)

// WebhookEvent is one event the stand-in emitted.
type WebhookEvent struct {
	ID   string // "evt_..."
	Type string // e.g. EventChargeRefunded

	// Payload is the Stripe Event object, byte for byte the body of each of its deliveries.
	Payload json.RawMessage
}

// WebhookDelivery is one attempt to deliver an event to Options.WebhookURL.
type WebhookDelivery struct {
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`

	// Copy is 0 for the event's own delivery and 1 to WebhookBehavior.Duplicate for its
	// duplicates, each retried on its own.
	Copy int `json:"copy"`

	// Attempt counts the attempts to deliver this copy of the event, from 1.
	Attempt int `json:"attempt"`

	// Status is the HTTP status the endpoint answered, 0 when it did not answer.
	Status int `json:"status"`

	// Delivered is whether the endpoint took the event: it answered 2xx.
	Delivered bool `json:"delivered"`

	// Error says why the attempt failed: a connection error, or the non-2xx status.
	Error string `json:"error,omitempty"`

	// Time is when the attempt ended.
	Time time.Time `json:"time"`
}

// WebhookBehavior is how the deliveries of events emitted from now on misbehave, in the ways a
// webhook handler must cope with: Stripe promises neither exactly-once, nor in-order, nor prompt
// delivery. The zero value delivers each event once, in order, at once.
type WebhookBehavior struct {
	// Duplicate is how many extra times each event is delivered: 1 delivers it twice, with the
	// same event ID, one copy right after the other.
	Duplicate int

	// Reorder holds events back and delivers them in batches, newest first: a batch goes out as
	// soon as two events are held, or ReorderWindow after the first of them was held, whichever
	// comes first. Turning it off sends the events held, newest first, at once.
	Reorder bool

	// ReorderWindow is how long Reorder holds a lone event. Zero means the default of 200ms; a
	// test that wants two events reordered however slowly it makes them sets it long.
	ReorderWindow time.Duration

	// Delay postpones the first attempt of each delivery by this much; retries wait their
	// backoff as usual.
	Delay time.Duration
}

// defaultReorderWindow is WebhookBehavior.ReorderWindow's default.
const defaultReorderWindow = 200 * time.Millisecond

// reorderBatch is how many events WebhookBehavior.Reorder holds before it sends them.
const reorderBatch = 2

// eventObject is a Stripe Event on the wire, as Stripe POSTs it to a webhook endpoint.
type eventObject struct {
	ID              string       `json:"id"`
	Object          string       `json:"object"`
	APIVersion      string       `json:"api_version"`
	Created         int64        `json:"created"`
	Data            eventData    `json:"data"`
	Livemode        bool         `json:"livemode"`
	PendingWebhooks int          `json:"pending_webhooks"`
	Request         eventRequest `json:"request"`
	Type            string       `json:"type"`
}

type eventData struct {
	Object any `json:"object"`
}

// eventRequest names the API request that caused an event; both are null for an event no API
// request caused (a dashboard action, a bank's dispute).
type eventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// emit records an event of typ about object and queues its deliveries without waiting for them.
// req is the API request that caused it, nil if none did. The caller holds s.mu, so that events
// are emitted in the order of what they tell.
func (s *Server) emit(typ string, object any, req *apiRequest) {
	ev := eventObject{
		ID:              newID("evt_"),
		Object:          "event",
		APIVersion:      stripeVersion,
		Created:         time.Now().Unix(),
		Data:            eventData{Object: object},
		PendingWebhooks: s.webhooks.endpoints(),
		Type:            typ,
	}
	if req != nil {
		ev.Request = eventRequest{ID: nullable(req.id), IdempotencyKey: nullable(req.idempotencyKey)}
	}
	s.webhooks.add(WebhookEvent{ID: ev.ID, Type: typ, Payload: mustMarshal(ev)})
}

// WebhookEvents returns every event emitted since the Server started or was Reset, oldest first,
// whether or not Options.WebhookURL is set.
func (s *Server) WebhookEvents() []WebhookEvent {
	wh := s.webhooks
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return slices.Clone(wh.events)
}

// WebhookDeliveries returns every attempt to deliver an event, oldest first (the last 10,000 of
// a long run).
func (s *Server) WebhookDeliveries() []WebhookDelivery {
	wh := s.webhooks
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return slices.Clone(wh.deliveries)
}

// SetWebhookBehavior sets how the deliveries of events emitted from now on behave. Negative
// counts and durations count as zero. Reset restores the zero value.
func (s *Server) SetWebhookBehavior(b WebhookBehavior) {
	s.webhooks.setBehavior(WebhookBehavior{
		Duplicate:     max(b.Duplicate, 0),
		Reorder:       b.Reorder,
		ReorderWindow: max(b.ReorderWindow, 0),
		Delay:         max(b.Delay, 0),
	})
}

// webhookBehavior returns what SetWebhookBehavior last set.
func (s *Server) webhookBehavior() WebhookBehavior {
	wh := s.webhooks
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return wh.behavior
}
