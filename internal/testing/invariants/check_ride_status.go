package invariants

import "net/http"

// The states of a ride, written out rather than taken from models.RideStatus, for the reason the
// price is (see rideAmountCents).
const (
	statusBooked    = "booked"
	statusDeclined  = "declined"
	statusRefunded  = "refunded"
	statusCancelled = "cancelled"
	statusDisputed  = "disputed"
)

// checkRideStatus holds each ride's status to what Stripe shows of its charge. A ride moves on
// from booked only when Stripe says so (a refund, a dispute) or when our cancel refunded it
// (checkRefunds holds those), so a ride must never show a refund or dispute that Stripe does not.
// Once Stripe's webhook deliveries were made, the converse holds too: a charge that Stripe shows
// refunded in full, by our cancel or from the dashboard, has its ride refunded or past it
// (cancelled, disputed), and a disputed charge has its ride disputed, whatever order the events
// came in.
func (c *checker) checkRideStatus() {
	delivered := c.observed.Webhooks != nil
	for i := range c.snap.rides {
		r := &c.snap.rides[i]
		if r.StripeChargeID == nil {
			c.checkUnchargedStatus(r)
			continue
		}
		ch, ok := c.succeeded[*r.StripeChargeID]
		if !ok {
			continue // checkCharges reports a charge Stripe does not hold
		}
		switch {
		case r.Status == statusRefunded && !ch.Refunded:
			c.violate(RuleRideStatusContradicted, "ride %d is refunded, but Stripe shows its charge %s refunded %d of %d",
				r.ID, ch.ID, ch.AmountRefunded, ch.Amount)
		case r.Status == statusDisputed && !ch.Disputed:
			c.violate(RuleRideStatusContradicted, "ride %d is disputed, but Stripe shows no dispute of its charge %s", r.ID, ch.ID)
		case delivered && ch.Disputed && r.Status != statusDisputed:
			c.violate(RuleRideStatusStale, "Stripe shows charge %s disputed and told the webhook, but its ride %d is %s", ch.ID, r.ID, r.Status)
		case delivered && ch.Refunded && r.Status == statusBooked:
			c.violate(RuleRideStatusStale, "Stripe shows charge %s refunded in full and told the webhook, but its ride %d is %s%s",
				ch.ID, r.ID, r.Status, c.describeRefundsOf(ch.ID))
		}
	}
}

// checkUnchargedStatus holds a ride without a charge to its booking's answer: declined when the
// booking stored a 402, booked otherwise (a charge not answered yet, or sent to review). Once the
// reaper deleted the key, either may stand.
func (c *checker) checkUnchargedStatus(r *rideRow) {
	want, answered := "", 0
	if r.IdempotencyKeyID != nil {
		if k, ok := c.keysByID[*r.IdempotencyKeyID]; ok {
			want = statusBooked
			if k.ResponseCode != nil {
				answered = *k.ResponseCode
			}
			if answered == http.StatusPaymentRequired {
				want = statusDeclined
			}
		}
	}
	switch {
	case want != "" && r.Status != want:
		c.violate(RuleRideStatusContradicted, "ride %d has no charge and its booking answered %d, but it is %s (want %s)",
			r.ID, answered, r.Status, want)
	case want == "" && r.Status != statusBooked && r.Status != statusDeclined:
		c.violate(RuleRideStatusContradicted, "ride %d has no charge but is %s", r.ID, r.Status)
	}
}

// describeRefundsOf names the refunds Stripe holds of chargeID, for a violation's detail.
func (c *checker) describeRefundsOf(chargeID string) string {
	refunds := c.refundsByCharge[chargeID]
	if len(refunds) == 0 {
		return ""
	}
	return "; Stripe's refunds of it: " + describeRefunds(refunds)
}
