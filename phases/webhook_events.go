package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	EventKept      EventResult = "kept"      // a new event for a charge no ride records yet: recorded, applied once one does
	EventDuplicate EventResult = "duplicate" // recorded before: a repeated delivery, which changes nothing
	EventIgnored   EventResult = "ignored"   // a type we do not act on: neither recorded nor applied
)

// Bounds on what an event may say, so that a signed event that no column can hold is refused
// before it reaches the database rather than failing there every time Stripe delivers it.
const (
	eventIDMaxChars  = 255 // stripe_events.id's CHECK; Stripe's ids are about 30
	chargeIDMaxChars = 255 // rides.stripe_charge_id's and stripe_events.charge_id's CHECKs

	// eventCreatedMaxAhead is how far past our clock an event's creation may be: clocks differ by
	// seconds, and Stripe stamps its events when it creates them.
	eventCreatedMaxAhead = time.Hour
)

// InvalidEventError is a verified Stripe event that cannot be applied as sent: a dispute with no
// charge, an id no column holds, a creation time to come. Nothing of it is stored.
type InvalidEventError struct {
	EventID string
	Reason  string // what is wrong with it, in a sentence for Stripe's dashboard
}

// Error says which event cannot be applied, and why.
func (e *InvalidEventError) Error() string {
	return fmt.Sprintf("Stripe event %.100q cannot be applied: %s", e.EventID, e.Reason)
}

// ApplyStripeEvent applies a verified Stripe event once. The event's id is recorded in the
// transaction that applies it, so a delivery that Stripe repeats, even at the same moment,
// changes nothing; and a ride only ever moves to a state of higher precedence
// (models.RideStatus), so events applied in any order leave it the same:
//
//   - charge.refunded, for a charge refunded in full: the ride it paid for shows refunded,
//     unless our own cancel got there (cancelled outranks it);
//   - charge.dispute.created: the ride shows disputed, and `admin list-disputed` lists it.
//
// An event can come before the ride records its charge (the charge's answer was lost, and the
// retry is yet to come): it is kept, with its charge and status, and recordCharge applies it in
// the transaction that records the charge. Both transactions are SERIALIZABLE, and each reads
// what the other writes, so when they run at once one of them retries and sees the other.
//
// It returns the ride the event moved on, 0 if none, and an *InvalidEventError for an event
// that cannot be applied as sent.
func (e *Executor) ApplyStripeEvent(ctx context.Context, event *stripe.Event) (EventResult, int64, error) {
	chargeID, status, err := eventEffect(event)
	if err != nil || status == "" {
		return EventIgnored, 0, err
	}
	// Only an event we act on is judged: any other is acknowledged, whatever it says.
	if err := checkEvent(event, e.now()); err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.config.PhaseTimeout)
	defer cancel()

	result, rideID := EventApplied, int64(0)
	_, err = e.inSerializableTx(ctx, func(ctx context.Context, tx *phaseTx) error {
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
			result = EventKept // for the transaction that records the charge
			return models.StripeEventKeep(ctx, tx, event.ID, chargeID, status)
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

// ApplyKeptStripeEvents applies the events kept for a charge that a ride records by now, of those
// received within the last receivedWithin, and returns how many it applied: the events that
// name a ride because of it, not those a concurrent record of the charge applied. It reads them in
// pages of batchSize, each page's rides together, so that events kept for good (the charges of
// another integration on the same Stripe account) cannot keep it from the rest. recordCharge
// applies the events kept for its charge; this catches those it did not see:
//
//   - during a rolling deploy, a charge recorded by the release before this one, which does not
//     read kept events;
//   - on Citus, an event kept on the coordinator while a worker records its charge: no node sees
//     both transactions, so each can commit without seeing the other.
//
// The completer calls it on every pass.
func (e *Executor) ApplyKeptStripeEvents(ctx context.Context, receivedWithin time.Duration, batchSize int) (int, error) {
	applied := 0
	var after models.KeptStripeEventCursor
	for {
		kept, next, err := models.StripeEventListKept(ctx, e.pool, receivedWithin, after, batchSize)
		if err != nil {
			return applied, err
		}
		n, err := e.applyKeptPage(ctx, kept)
		applied += n
		if err != nil || len(kept) < batchSize {
			return applied, err
		}
		after = next
	}
}

// applyKeptPage applies the events of kept whose charge a ride records by now, one transaction
// a ride, and returns how many it applied.
func (e *Executor) applyKeptPage(ctx context.Context, kept []models.KeptStripeEvent) (int, error) {
	if len(kept) == 0 {
		return 0, nil
	}
	chargeIDs := make([]string, len(kept))
	for i, event := range kept {
		chargeIDs[i] = event.ChargeID
	}
	slices.Sort(chargeIDs)
	rides, err := models.RideListByStripeChargeIDs(ctx, e.pool, slices.Compact(chargeIDs))
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, ride := range rides {
		ctx, cancel := context.WithTimeout(ctx, e.config.PhaseTimeout)
		// One transaction a ride: on Citus, the coordinator's events and one rider's worker. It
		// reads the ride's kept events again, as recordCharge does, so that it applies and counts
		// only those still kept: a concurrent record of the charge may have applied them.
		var stillKept []models.KeptStripeEvent
		_, err := e.inSerializableTx(ctx, func(ctx context.Context, tx *phaseTx) error {
			stillKept = nil
			models.StripeEventsKeptFor(&tx.Writes, *ride.StripeChargeID, &stillKept)
			tx.afterWrites(func(batch *pgx.Batch) { applyKeptEvents(batch, ride, stillKept) })
			return nil
		})
		cancel()
		if err != nil {
			return applied, fmt.Errorf("error applying the Stripe events kept for ride %d: %w", ride.ID, err)
		}
		applied += len(stillKept)
	}
	return applied, nil
}

// checkEvent refuses an event whose id or creation time no honest event of Stripe's has.
func checkEvent(event *stripe.Event, now time.Time) error {
	switch {
	case event.ID == "" || len(event.ID) > eventIDMaxChars:
		return &InvalidEventError{EventID: event.ID, Reason: fmt.Sprintf("its id must have 1 to %d characters.", eventIDMaxChars)}
	case event.Created <= 0 || event.Created > now.Add(eventCreatedMaxAhead).Unix():
		return &InvalidEventError{EventID: event.ID, Reason: fmt.Sprintf("it was created at %d (Unix time), not a time to come.", event.Created)}
	}
	return nil
}

// eventEffect says what an event does to a ride: the charge it concerns and the status it
// reports. An empty status is a type we ignore; an empty charge with a status, an event of a
// type we record that changes no ride. An event of a type we act on whose object is not what
// that type carries is an *InvalidEventError.
func eventEffect(event *stripe.Event) (chargeID string, status models.RideStatus, err error) {
	switch event.Type {
	case EventChargeRefunded:
		var charge stripe.Charge
		if err := json.Unmarshal(event.Data.Raw, &charge); err != nil {
			return "", "", &InvalidEventError{EventID: event.ID, Reason: "its object is not a charge: " + err.Error()}
		}
		if !charge.Refunded {
			return "", models.RideStatusRefunded, nil
		}
		chargeID = charge.ID
		status = models.RideStatusRefunded
	case EventChargeDisputeCreated:
		var dispute stripe.Dispute
		if err := json.Unmarshal(event.Data.Raw, &dispute); err != nil {
			return "", "", &InvalidEventError{EventID: event.ID, Reason: "its object is not a dispute: " + err.Error()}
		}
		if dispute.Charge != nil {
			chargeID = dispute.Charge.ID
		}
		status = models.RideStatusDisputed
	default:
		return "", "", nil
	}
	if chargeID == "" || len(chargeID) > chargeIDMaxChars {
		return "", "", &InvalidEventError{EventID: event.ID,
			Reason: fmt.Sprintf("its %s names no charge id of 1 to %d characters.", event.Type, chargeIDMaxChars)}
	}
	return chargeID, status, nil
}
