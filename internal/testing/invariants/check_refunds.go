package invariants

import (
	"slices"
	"strings"
)

// checkRefunds holds Stripe's refunds and the rides to each other, as checkCharges does charges:
// every refund at Stripe is a cancel's, recorded by its ride, or one the run made from the
// dashboard (or of a request a person reviews); no charge is refunded twice; and every refund a
// ride records is a refund Stripe holds, of the ride's own charge, in full. Together they make
// a cancelled ride's refund the one and only refund of its charge.
func (c *checker) checkRefunds() {
	recorded := map[string]bool{}
	for i := range c.snap.rides {
		if r := &c.snap.rides[i]; r.StripeRefundID != nil {
			recorded[*r.StripeRefundID] = true
		}
	}
	for _, rf := range c.observed.Refunds {
		if rf.Status != ChargeStatusSucceeded || recorded[rf.ID] || c.dashboardRefunds[rf.ID] {
			continue
		}
		if rf.IdempotencyKey != "" && c.reviewStripeKeys[rf.IdempotencyKey] {
			continue
		}
		c.violate(RuleRefundOrphan, "Stripe holds refund %s that no ride records and the run did not make from the dashboard%s",
			describeRefunds([]Refund{rf}), c.describeStripeKeyOwner(rf.IdempotencyKey))
	}

	// Two refunds of one charge, or under one Stripe key, refunded a ride twice. A pair that
	// shares both is reported once.
	reported := map[string]bool{}
	reportGroups := func(groups map[string][]Refund, what string) {
		for _, name := range sortedKeys(groups) {
			refunds := groups[name]
			if len(refunds) < 2 {
				continue
			}
			ids := make([]string, 0, len(refunds))
			for _, rf := range refunds {
				ids = append(ids, rf.ID)
			}
			slices.Sort(ids)
			if sig := strings.Join(ids, ","); !reported[sig] {
				reported[sig] = true
				c.violate(RuleRefundDuplicate, "%s %s was refunded %d times: %s%s",
					what, name, len(refunds), describeRefunds(refunds), c.describeChargeRides(refunds[0].Charge))
			}
		}
	}
	reportGroups(c.refundsByCharge, "charge")
	reportGroups(c.refundsByKey, "Stripe key")

	for i := range c.snap.rides {
		r := &c.snap.rides[i]
		if r.StripeRefundID == nil {
			if r.Status == statusCancelled {
				c.violate(RuleRefundMismatch, "ride %d is cancelled but records no refund", r.ID)
			}
			continue
		}
		// Our refund makes a ride cancelled, or leaves it disputed, which outranks it.
		if r.Status != statusCancelled && r.Status != statusDisputed {
			c.violate(RuleRefundMismatch, "ride %d records refund %s but is %s", r.ID, *r.StripeRefundID, r.Status)
		}
		rf, ok := c.refunds[*r.StripeRefundID]
		switch {
		case !ok:
			c.violate(RuleRefundMismatch, "ride %d records refund %s, which Stripe does not hold as succeeded", r.ID, *r.StripeRefundID)
		case r.StripeChargeID == nil || rf.Charge != *r.StripeChargeID:
			c.violate(RuleRefundMismatch, "ride %d charged %s records refund %s, which is of charge %s",
				r.ID, optString(r.StripeChargeID), rf.ID, rf.Charge)
		case rf.Amount != rideAmountCents || rf.Currency != rideCurrency:
			c.violate(RuleRefundMismatch, "ride %d records refund %s of %d %s, not the whole ride", r.ID, rf.ID, rf.Amount, rf.Currency)
		case c.dashboardRefunds[rf.ID]:
			c.violate(RuleRefundMismatch, "ride %d records refund %s, which the run made from the dashboard, not a cancel", r.ID, rf.ID)
		}
	}
}

// describeChargeRides names the rides that record chargeID, for a violation's detail.
func (c *checker) describeChargeRides(chargeID string) string {
	rides := c.ridesByChargeID[chargeID]
	if len(rides) == 0 {
		return ", a charge no ride records"
	}
	r := rides[0]
	return ", the charge of ride " + optInt(&r.ID) + " (" + r.Status + ", refund " + optString(r.StripeRefundID) + ")"
}
