package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/models"
)

// The Stripe event types a webhook acts on; every other type is acknowledged and ignored.
const (
	EventChargeRefunded       = "charge.refunded"
	EventChargeDisputeCreated = "charge.dispute.created"
)

// EventActedOn reports whether ApplyStripeEvent acts on events of eventType.
func EventActedOn(eventType string) bool {
	return eventType == EventChargeRefunded || eventType == EventChargeDisputeCreated
}

// EventResult is what applying a Stripe event did.
type EventResult string

// The results of ApplyStripeEvent.
const (
	EventApplied   EventResult = "applied"   // a new event: recorded, and its ride moved on if it has one
	EventDuplicate EventResult = "duplicate" // recorded before: a repeated delivery, which changes nothing
	EventIgnored   EventResult = "ignored"   // a type we do not act on: neither recorded nor applied
)

// ApplyStripeEvent applies a verified Stripe event once. The event's id is recorded in the
// transaction that applies it, so a delivery that Stripe repeats, even at the same moment,
// changes nothing; and a ride only ever moves to a state of higher precedence
// (models.RideStatus), so events applied in any order leave it the same:
//
//   - charge.refunded, for a charge refunded in full: the ride it paid for shows refunded,
//     unless our own cancel got there (cancelled outranks it);
//   - charge.dispute.created: the ride shows disputed, and `admin list-disputed` lists it.
//
// It returns the ride the event moved on, 0 if none.
func (e *Executor) ApplyStripeEvent(ctx context.Context, event *stripe.Event) (EventResult, int64, error) {
	chargeID, status, err := eventEffect(event)
	if err != nil || status == "" {
		return EventIgnored, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.config.PhaseTimeout)
	defer cancel()

	result, rideID := EventApplied, int64(0)
	err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		result, rideID = EventApplied, 0
		recorded, err := models.StripeEventRecord(ctx, tx, event.ID, string(event.Type), time.Unix(event.Created, 0))
		if err != nil {
			return err
		}
		if !recorded {
			result = EventDuplicate
			return nil
		}
		if chargeID == "" {
			return nil // a partial refund: the ride stays as it is
		}
		id, _, err := models.RideRaiseStatus(ctx, tx, chargeID, status)
		if errors.Is(err, models.ErrNotFound) {
			return nil // a charge that paid for no ride of ours
		}
		if err != nil {
			return err
		}
		rideID = id
		return models.StripeEventSetRide(ctx, tx, event.ID, id)
	})
	if err != nil {
		return "", 0, fmt.Errorf("error applying Stripe event %s: %w", event.ID, err)
	}
	return result, rideID, nil
}

// eventEffect says what an event does to a ride: the charge it concerns and the status it
// reports. An empty status is a type we ignore; an empty charge with a status, an event of a
// type we record that changes no ride.
func eventEffect(event *stripe.Event) (chargeID string, status models.RideStatus, err error) {
	switch event.Type {
	case EventChargeRefunded:
		var charge stripe.Charge
		if err := json.Unmarshal(event.Data.Raw, &charge); err != nil {
			return "", "", fmt.Errorf("error decoding the charge of event %s: %w", event.ID, err)
		}
		if !charge.Refunded {
			return "", models.RideStatusRefunded, nil
		}
		return charge.ID, models.RideStatusRefunded, nil
	case EventChargeDisputeCreated:
		var dispute stripe.Dispute
		if err := json.Unmarshal(event.Data.Raw, &dispute); err != nil {
			return "", "", fmt.Errorf("error decoding the dispute of event %s: %w", event.ID, err)
		}
		if dispute.Charge == nil || dispute.Charge.ID == "" {
			return "", "", fmt.Errorf("event %s: a dispute with no charge", event.ID)
		}
		return dispute.Charge.ID, models.RideStatusDisputed, nil
	}
	return "", "", nil
}
