package api

import (
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// webhookMaxBytes bounds an event's body. Stripe's events are a few KiB; a charge with a long
// history of refunds stays far below this.
const webhookMaxBytes = 256 << 10

// stripeWebhook is POST /webhooks/stripe, where Stripe tells us what happened to our charges.
// Anyone can post here, so an event counts only when its Stripe-Signature header (an
// HMAC-SHA256 over the timestamp and body, under the endpoint's signing secret) verifies and is
// at most five minutes old: stripe-go's own webhook package checks both. Anything else is a 400
// that stores nothing.
//
// Stripe delivers each event at least once, retrying until it gets a 2xx, in no particular
// order: phases.ApplyStripeEvent applies each event once, and any order to the same end. A
// signed event that cannot be applied as sent is a 400 that says why and stores nothing. Stripe
// retries a 400 as it does a 5xx, so the status does not stop the deliveries: it says the event
// is at fault, not us, its detail shows in Stripe's dashboard, and a 5xx stays a failure of ours
// that our alerts can trust; Stripe delivers it again later.
func (s *Server) stripeWebhook(w http.ResponseWriter, r *http.Request) {
	payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, webhookMaxBytes))
	if err != nil {
		writeProblem(w, errInvalidParameter("", "The event body could not be read."))
		return
	}
	// The API version is not checked: we read only a charge's id and refunded flag and a
	// dispute's charge, which every version carries alike, and an account whose default version
	// differs from stripe-go's would otherwise have every event refused for good.
	event, err := webhook.ConstructEventWithOptions(payload, r.Header.Get("Stripe-Signature"), s.webhookSecret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil && !signatureError(err) {
		// The signature verified; the body is no Stripe event.
		s.refuseEvent(w, r, metrics.WebhookTypeOther, "", "The event's body is not a Stripe event: "+err.Error())
		return
	}
	if err != nil {
		s.metrics.StripeEvents.WithLabelValues(metrics.WebhookTypeOther, metrics.WebhookSignatureInvalid).Inc()
		detail := "The event's Stripe-Signature does not verify."
		switch {
		case errors.Is(err, webhook.ErrNotSigned):
			detail = "The event has no Stripe-Signature header."
		case errors.Is(err, webhook.ErrTooOld):
			detail = "The event's signature is more than five minutes old."
		}
		writeProblem(w, newError(http.StatusBadRequest, problem.CodeWebhookSignatureInvalid, "Invalid signature", detail))
		return
	}

	eventType := string(event.Type)
	if !phases.EventActedOn(eventType) {
		eventType = metrics.WebhookTypeOther
	}
	result, rideID, err := s.executor.ApplyStripeEvent(r.Context(), &event)
	if invalid, ok := errors.AsType[*phases.InvalidEventError](err); ok {
		s.refuseEvent(w, r, eventType, invalid.EventID, "The event cannot be applied as sent: "+invalid.Reason)
		return
	}
	if err != nil {
		s.metrics.StripeEvents.WithLabelValues(eventType, metrics.WebhookError).Inc()
		s.logger.ErrorContext(r.Context(), "API: failed to apply Stripe event",
			slog.String("stripe_event_id", event.ID), slog.String("type", string(event.Type)), slog.String("error", err.Error()))
		if models.IsUnavailable(err) || errors.Is(err, phases.ErrCommitOutcomeUnknown) || errors.Is(err, phases.ErrConflict) {
			writeProblem(w, errDatabaseUnavailable())
			return
		}
		writeProblem(w, errInternal())
		return
	}
	s.metrics.StripeEvents.WithLabelValues(eventType, string(result)).Inc()
	s.logger.InfoContext(r.Context(), "API: Stripe event received",
		slog.String("stripe_event_id", event.ID), slog.String("type", string(event.Type)),
		slog.String("result", string(result)), slog.Int64("ride_id", rideID))
	writeJSON(w, http.StatusOK, map[string]bool{"received": true})
}

// signatureError reports whether err is stripe-go's refusal of an event's signature, rather
// than of a body that a good signature covers.
func signatureError(err error) bool {
	for _, sig := range []error{webhook.ErrNotSigned, webhook.ErrInvalidHeader, webhook.ErrNoValidSignature, webhook.ErrTooOld} {
		if errors.Is(err, sig) {
			return true
		}
	}
	return false
}

// eventIDLogMaxChars bounds the event id a refusal logs: a signed event's id can be as long as
// its body, and the log line is there to find the event at Stripe's dashboard.
const eventIDLogMaxChars = 100

// refuseEvent answers a signed event that cannot be applied as sent: a 400 with detail, which
// Stripe's dashboard shows, logged once with the event's id. Nothing is stored.
func (s *Server) refuseEvent(w http.ResponseWriter, r *http.Request, eventType, eventID, detail string) {
	s.metrics.StripeEvents.WithLabelValues(eventType, metrics.WebhookInvalid).Inc()
	if len(eventID) > eventIDLogMaxChars {
		eventID = eventID[:eventIDLogMaxChars]
	}
	s.logger.WarnContext(r.Context(), "API: Stripe event refused",
		slog.String("stripe_event_id", eventID), slog.String("detail", detail))
	writeProblem(w, newError(http.StatusBadRequest, problem.CodeWebhookEventInvalid, "Invalid event", detail))
}
