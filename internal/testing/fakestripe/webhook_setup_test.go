package fakestripe_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

const testWebhookSecret = "whsec_rocketrides"

// pollDeadline bounds every wait for something asynchronous: far longer than anything should
// take, even on a busy machine, so that only a real failure runs into it.
const pollDeadline = 20 * time.Second

// received is one delivery a webhookReceiver took.
type received struct {
	body        []byte
	signature   string
	contentType string
	at          time.Time

	// event is the body as stripe-go's webhook package constructs it under the right secret,
	// and err what it said.
	event stripe.Event
	err   error
}

// webhookReceiver is a webhook endpoint on a loopback port that records each delivery, verifies
// it with stripe-go, and answers with the status answer gives for the n-th delivery (from 0).
type webhookReceiver struct {
	url    string
	answer func(n int) int

	mu  sync.Mutex
	got []received
}

// newWebhookReceiver starts a receiver until the test ends; a nil answer is always 200.
func newWebhookReceiver(t *testing.T, answer func(n int) int) *webhookReceiver {
	t.Helper()
	if answer == nil {
		answer = func(int) int { return http.StatusOK }
	}
	rc := &webhookReceiver{answer: answer}
	hs := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(hs.Close)
	rc.url = hs.URL + "/webhooks/stripe"
	return rc
}

func (rc *webhookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	got := received{
		body:        body,
		signature:   r.Header.Get("Stripe-Signature"),
		contentType: r.Header.Get("Content-Type"),
		at:          time.Now(),
	}
	got.event, got.err = webhook.ConstructEventWithOptions(body, got.signature, testWebhookSecret, webhook.ConstructEventOptions{})
	rc.mu.Lock()
	n := len(rc.got)
	rc.got = append(rc.got, got)
	rc.mu.Unlock()
	w.WriteHeader(rc.answer(n))
}

// received returns what the receiver took so far.
func (rc *webhookReceiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// waitFor waits until the receiver took at least n deliveries and returns them all.
func (rc *webhookReceiver) waitFor(t *testing.T, n int) []received {
	t.Helper()
	var got []received
	eventually(t, func() bool {
		got = rc.received()
		return len(got) >= n
	}, "%d webhook deliveries", n)
	return got
}

// eventually polls cond until it holds, failing the test after pollDeadline.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(pollDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for "+format, args...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// setupWebhooks is setup with the stand-in delivering to rc, retrying quickly.
func setupWebhooks(t *testing.T, rc *webhookReceiver) *testBundle {
	t.Helper()
	server := fakestripe.NewTestServer(t, fakestripe.Options{
		Logger:           testLogger(t),
		WebhookURL:       rc.url,
		WebhookSecret:    testWebhookSecret,
		WebhookRetryBase: 10 * time.Millisecond,
		WebhookRetryMax:  50 * time.Millisecond,
	})
	return &testBundle{server: server, stripe: newStripeClient(t, server.URL, testAPIKey, &http.Transport{})}
}

// requireVerified asserts that stripe-go accepted got's signature and that got is an event of
// type typ, and decodes its data.object into out, if not nil.
func requireVerified(t *testing.T, got received, typ stripe.EventType, out any) stripe.Event {
	t.Helper()
	if got.err != nil {
		t.Fatalf("stripe-go refused the delivery: %v\nStripe-Signature: %s\n%s", got.err, got.signature, got.body)
	}
	if got.event.Type != typ {
		t.Fatalf("got event %s of type %q, want %q", got.event.ID, got.event.Type, typ)
	}
	if out != nil {
		if err := json.Unmarshal(got.event.Data.Raw, out); err != nil {
			t.Fatalf("error decoding the %s event's object: %v", typ, err)
		}
	}
	return got.event
}

// eventTypes lists the types of what the receiver took, in order.
func eventTypes(got []received) []stripe.EventType {
	types := make([]stripe.EventType, len(got))
	for i, r := range got {
		types[i] = r.event.Type
	}
	return types
}

// chargeRide charges a new rider's card through stripe-go.
func (b *testBundle) chargeRide(t *testing.T, idempotencyKey string) *stripe.Charge {
	t.Helper()
	ch, err := b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_visa").ID, idempotencyKey))
	if err != nil {
		t.Fatalf("error charging: %v", err)
	}
	return ch
}
