package invariants

import (
	"fmt"

	"github.com/rocketrides/rocketrides/internal/jobargs"
)

// checkCancelled holds every cancel key that finished with 200 to what the 200 promised, as
// checkCreated does a booking's 201: the ride it claimed, cancelled, recording the very refund
// Stripe holds under the key's Stripe idempotency key, and a refund receipt.
func (c *checker) checkCancelled() {
	for i := range c.snap.keys {
		k := &c.snap.keys[i]
		if !isCancel(k) || k.ResponseCode == nil || *k.ResponseCode != 200 {
			continue
		}
		rides := c.ridesByCancelKeyID[k.ID]
		if len(rides) != 1 {
			c.violate(RuleCancelResponseMismatch, "%s finished with 200 but claimed %d rides", describeKey(k), len(rides))
			continue
		}
		ride := rides[0]
		if ride.Status != statusCancelled && ride.Status != statusDisputed {
			c.violate(RuleCancelResponseMismatch, "%s finished with 200 but its ride %d is %s", describeKey(k), ride.ID, ride.Status)
		}
		if k.ResponseRideID == nil || *k.ResponseRideID != ride.ID || optString(k.ResponseRefundID) != optString(ride.StripeRefundID) {
			c.violate(RuleCancelResponseMismatch, "%s stored a 200 for ride %s refunded %s, but its ride is %d refunded %s",
				describeKey(k), optInt(k.ResponseRideID), optString(k.ResponseRefundID), ride.ID, optString(ride.StripeRefundID))
		}

		refunds := c.refundsByKey[k.StripeIdempotencyKey]
		switch {
		case len(refunds) != 1:
			c.violate(RuleCancelRefundCount, "%s finished with 200 (ride %d, refund %s) but Stripe holds %d refunds under its Stripe key: %s",
				describeKey(k), ride.ID, optString(ride.StripeRefundID), len(refunds), describeRefunds(refunds))
		case ride.StripeRefundID != nil && refunds[0].ID != *ride.StripeRefundID:
			c.violate(RuleRefundMismatch, "%s: Stripe's refund under its Stripe key is %s, but ride %d records %s",
				describeKey(k), refunds[0].ID, ride.ID, *ride.StripeRefundID)
		}

		if ride.RefundReceiptSentAt == nil {
			c.violate(RuleReceiptMissing, "cancelled ride %d of %s has no refund receipt recorded; its refund receipt jobs: %s",
				ride.ID, describeKey(k), c.describeReceiptJobs(jobargs.SendRefundReceiptKind, ride.ID))
		}
	}
}

// describeCancelRide names the ride a cancel key claimed, for a violation's detail.
func (c *checker) describeCancelRide(key *keyRow) string {
	rides := c.ridesByCancelKeyID[key.ID]
	if len(rides) == 0 {
		return ", and claimed no ride"
	}
	return fmt.Sprintf(", and claimed ride %d (%s, refund %s)", rides[0].ID, rides[0].Status, optString(rides[0].StripeRefundID))
}
