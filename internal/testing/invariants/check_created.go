package invariants

import (
	"fmt"

	"github.com/rocketrides/rocketrides/internal/jobargs"
)

// checkCreated holds every key that finished with 201 to what the 201 promised: one ride,
// charged, with the very charge Stripe holds under the key's Stripe idempotency key, and a
// receipt.
func (c *checker) checkCreated() {
	for i := range c.snap.keys {
		k := &c.snap.keys[i]
		if k.ResponseCode == nil || *k.ResponseCode != 201 {
			continue
		}
		rides := c.ridesByKeyID[k.ID]
		if len(rides) != 1 {
			c.violate(RuleCreatedWithoutRide, "%s finished with 201 but has %d rides", describeKey(k), len(rides))
			continue
		}
		ride := rides[0]
		if ride.StripeChargeID == nil {
			c.violate(RuleCreatedRideUncharged, "%s finished with 201 but its ride %d has no charge", describeKey(k), ride.ID)
		}
		if k.ResponseRideID == nil || *k.ResponseRideID != ride.ID || optString(k.ResponseChargeID) != optString(ride.StripeChargeID) {
			c.violate(RuleCreatedResponseMismatch, "%s stored a 201 for ride %s charged %s, but its ride is %d charged %s",
				describeKey(k), optInt(k.ResponseRideID), optString(k.ResponseChargeID), ride.ID, optString(ride.StripeChargeID))
		}

		charges := c.succeededByKey[k.StripeIdempotencyKey]
		switch {
		case len(charges) != 1:
			c.violate(RuleCreatedChargeCount, "%s finished with 201 (ride %d, charge %s) but Stripe holds %d succeeded charges under its Stripe key: %s",
				describeKey(k), ride.ID, optString(ride.StripeChargeID), len(charges), describeCharges(charges))
		case ride.StripeChargeID != nil && charges[0].ID != *ride.StripeChargeID:
			c.violate(RuleChargeMismatch, "%s: Stripe's charge under its Stripe key is %s, but ride %d records %s",
				describeKey(k), charges[0].ID, ride.ID, *ride.StripeChargeID)
		}

		if ride.ReceiptSentAt == nil {
			c.violate(RuleReceiptMissing, "ride %d of %s has no receipt recorded; its receipt jobs: %s",
				ride.ID, describeKey(k), c.describeReceiptJobs(jobargs.SendRideReceiptKind, ride.ID))
		}
	}
}

// describeReceiptJobs lists the receipt jobs of kind (a jobargs kind) for a ride, for a
// violation's detail.
func (c *checker) describeReceiptJobs(kind string, rideID int64) string {
	jobs := c.receiptJobs[receiptJobKey{kind, rideID}]
	if len(jobs) == 0 {
		return "none"
	}
	s := ""
	for i, j := range jobs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("job %d %s after %d attempts", j.ID, j.State, j.Attempt)
	}
	return s
}
