package invariants

import "encoding/json"

// The Stripe event types the webhook acts on, written out rather than taken from phases: the
// webhook records these, each once, and ignores every other type (charge.succeeded, say).
const (
	eventChargeRefunded       = "charge.refunded"
	eventChargeDisputeCreated = "charge.dispute.created"
)

// stripeEvent is what the checker reads of a Stripe Event: its charge, and for a refund whether
// it refunded the charge in full.
type stripeEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Object struct {
			ID       string          `json:"id"`       // charge.refunded: the charge
			Refunded bool            `json:"refunded"` // charge.refunded: in full
			Charge   json.RawMessage `json:"charge"`   // charge.dispute.created: the charge's id, or the charge
		} `json:"object"`
	} `json:"data"`
}

// chargeID is the charge whose ride the event moves on, or "" when it moves none (a partial
// refund).
func (ev *stripeEvent) chargeID() string {
	obj := ev.Data.Object
	if ev.Type == eventChargeRefunded {
		if !obj.Refunded {
			return ""
		}
		return obj.ID
	}
	var id string
	if json.Unmarshal(obj.Charge, &id) == nil {
		return id
	}
	var expanded struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(obj.Charge, &expanded) // neither a string nor an object: no charge
	return expanded.ID
}

// checkStripeEvents holds stripe_events to the events Stripe emitted, once their deliveries were
// made: every event of a type the webhook acts on was applied, that is recorded in stripe_events
// with its type and with the ride its charge paid for; and stripe_events holds no event Stripe
// never sent. Its primary key makes each event recorded once, however often Stripe delivered
// it; checkRideStatus holds the rides to what the events said.
func (c *checker) checkStripeEvents(wh *Webhooks) {
	rows := make(map[string]*stripeEventRow, len(c.snap.stripeEvents))
	for i := range c.snap.stripeEvents {
		rows[c.snap.stripeEvents[i].ID] = &c.snap.stripeEvents[i]
	}
	emitted := map[string]bool{}
	for _, raw := range wh.Events {
		var ev stripeEvent
		if err := json.Unmarshal(raw, &ev); err != nil || ev.ID == "" {
			c.violate(RuleStripeEventMismatch, "Stripe emitted an event the checker cannot read (%v): %.200s", err, raw)
			continue
		}
		emitted[ev.ID] = true
		if ev.Type != eventChargeRefunded && ev.Type != eventChargeDisputeCreated {
			continue
		}
		row := rows[ev.ID]
		if row == nil {
			c.violate(RuleStripeEventMissing, "Stripe emitted %s %s (charge %s), which was never applied",
				ev.Type, ev.ID, optString(nonEmpty(ev.chargeID())))
			continue
		}
		var wantRide *int64
		if rides := c.ridesByChargeID[ev.chargeID()]; ev.chargeID() != "" && len(rides) == 1 {
			wantRide = &rides[0].ID
		}
		if row.Type != ev.Type || optInt(row.RideID) != optInt(wantRide) {
			c.violate(RuleStripeEventMismatch, "Stripe event %s is %s of charge %s, whose ride is %s, but it was recorded as %s of ride %s",
				ev.ID, ev.Type, optString(nonEmpty(ev.chargeID())), optInt(wantRide), row.Type, optInt(row.RideID))
		}
	}
	for i := range c.snap.stripeEvents {
		if row := &c.snap.stripeEvents[i]; !emitted[row.ID] {
			c.violate(RuleStripeEventMismatch, "stripe_events holds %s %s (ride %s), which Stripe never emitted",
				row.Type, row.ID, optInt(row.RideID))
		}
	}
}
