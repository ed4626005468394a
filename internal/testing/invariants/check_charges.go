package invariants

import (
	"slices"
	"strings"
)

// The price of a ride, as Stripe must have charged it: $20.00. Written here rather than taken
// from phases.RideAmountCents, so that a change of what the code charges is a violation until
// the auditor is told of it too, instead of an expectation that follows the code it checks.
const (
	rideAmountCents int64 = 2000
	rideCurrency          = "usd"
)

// The charge metadata that names the request a charge was made for, as the API sends it: written
// here, like the price, rather than taken from phases.
const (
	metadataRiderID        = "rider_id"
	metadataIdempotencyKey = "idempotency_key"
)

// checkCharges holds Stripe and the rides to each other: every succeeded charge belongs to a
// ride (or to a request a person reviews), no ride or Stripe key is charged twice, and every
// charge a ride records is a succeeded charge of the right customer and amount.
func (c *checker) checkCharges() {
	var succeeded []Charge
	for _, ch := range c.observed.Charges {
		if ch.Status == ChargeStatusSucceeded {
			succeeded = append(succeeded, ch)
		}
	}
	for _, ch := range succeeded {
		if len(c.ridesByChargeID[ch.ID]) == 0 && !c.reviewStripeKeys[ch.IdempotencyKey] {
			c.violate(RuleChargeOrphan, "Stripe holds succeeded charge %s that no ride records%s",
				describeCharges([]Charge{ch}), c.describeStripeKeyOwner(ch.IdempotencyKey))
		}
	}

	// Two succeeded charges under one Stripe key, or for one ride, are a double charge. A pair
	// that shares both is reported once.
	reported := map[string]bool{}
	reportGroups := func(groups map[string][]Charge, what string) {
		for _, name := range sortedKeys(groups) {
			charges := groups[name]
			if len(charges) < 2 {
				continue
			}
			ids := make([]string, 0, len(charges))
			for _, ch := range charges {
				ids = append(ids, ch.ID)
			}
			slices.Sort(ids)
			if sig := strings.Join(ids, ","); !reported[sig] {
				reported[sig] = true
				c.violate(RuleChargeDuplicate, "%s %s was charged %d times: %s%s",
					what, name, len(charges), describeCharges(charges), c.describeStripeKeyOwner(charges[0].IdempotencyKey))
			}
		}
	}
	reportGroups(c.succeededByKey, "Stripe key")
	// One request charged under two Stripe keys: what a Stripe key drawn anew for a request
	// that the database forgot (a restore, a failover that lost a commit) would do.
	byRequest := map[string][]Charge{}
	for _, ch := range succeeded {
		if rider, key := ch.Metadata[metadataRiderID], ch.Metadata[metadataIdempotencyKey]; rider != "" && key != "" {
			name := "of rider " + rider + " with key " + key
			byRequest[name] = append(byRequest[name], ch)
		}
	}
	reportGroups(byRequest, "request")

	for i := range c.snap.rides {
		r := &c.snap.rides[i]
		if r.StripeChargeID == nil {
			continue
		}
		ch, ok := c.succeeded[*r.StripeChargeID]
		switch {
		case !ok:
			c.violate(RuleChargeMismatch, "ride %d records charge %s, which Stripe does not hold as succeeded", r.ID, *r.StripeChargeID)
		case ch.Customer != r.StripeCustomerID || ch.Amount != rideAmountCents || ch.Currency != rideCurrency:
			c.violate(RuleChargeMismatch, "ride %d of customer %s records charge %s of %d %s to customer %s",
				r.ID, r.StripeCustomerID, ch.ID, ch.Amount, ch.Currency, ch.Customer)
		}
		if len(c.ridesByChargeID[*r.StripeChargeID]) > 1 && c.ridesByChargeID[*r.StripeChargeID][0] == r {
			c.violate(RuleChargeMismatch, "charge %s is recorded by %d rides", *r.StripeChargeID, len(c.ridesByChargeID[*r.StripeChargeID]))
		}

		if r.IdempotencyKeyID == nil {
			continue // its key was reaped: no answer is stored to hold to the charge
		}
		// An unfinished key is reported as such; a finished one must have told of the charge.
		// Requests recorded for review too: the API records one for review only when it could
		// not learn whether Stripe charged, so its ride records no charge, and a review key
		// whose ride does told its client "needs review" of a charge it knew of.
		if k := c.keysByID[*r.IdempotencyKeyID]; k != nil && k.ResponseCode != nil && *k.ResponseCode != 201 {
			c.violate(RuleChargedNotCreated, "ride %d was charged (%s) but %s did not finish with 201",
				r.ID, *r.StripeChargeID, describeKey(k))
		}
	}
}

// describeStripeKeyOwner names the idempotency key a Stripe key belongs to, for a violation's
// detail.
func (c *checker) describeStripeKeyOwner(stripeKey string) string {
	if stripeKey == "" {
		return ", sent without a Stripe idempotency key"
	}
	for i := range c.snap.keys {
		if k := &c.snap.keys[i]; k.StripeIdempotencyKey == stripeKey {
			return ", for " + describeKey(k)
		}
	}
	return ", under Stripe key " + stripeKey + " that no idempotency key has"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
