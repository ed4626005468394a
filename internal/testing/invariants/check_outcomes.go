package invariants

import (
	"fmt"
	"net/http"
	"slices"
)

// codePaymentNeedsReview is the problem code of the 500 that sets a request aside for a person.
// Written out rather than taken from package problem: the codes are a promise to clients, and
// an auditor that borrowed the constant would follow a renamed code without noticing.
const codePaymentNeedsReview = "payment_needs_review"

// cancelFinalCodes are the problem codes of a cancel's 409s, which it stores on its key as
// final, like codePaymentNeedsReview (and written out for the same reason); and codeNotFound
// that of its 404, a ride the rider does not have.
var cancelFinalCodes = []string{"ride_already_cancelled", "ride_already_refunded", "ride_disputed", "ride_not_charged"}

const codeNotFound = "not_found"

// checkOutcomes holds what clients were told to each other and to the database. Every call with
// one key must hear the same story (one ride booked, one ride cancelled, or one final refusal),
// and that story must be the one the database tells. An unknown outcome is always honest and
// never checked.
func (c *checker) checkOutcomes() {
	groups := map[userKey][]ClientOutcome{}
	var order []userKey
	for _, o := range c.observed.Outcomes {
		uk := userKey{o.UserID, o.IdempotencyKey}
		if _, ok := groups[uk]; !ok {
			order = append(order, uk)
		}
		groups[uk] = append(groups[uk], o)
	}
	for _, uk := range order {
		c.checkOutcomeGroup(uk, groups[uk])
	}
}

// answer is one distinct thing clients were told about a key.
type answer struct {
	kind       OutcomeKind
	rideID     int64
	chargeID   string
	refundID   string
	statusCode int
	code       string
}

func (a answer) String() string {
	switch a.kind {
	case OutcomeCreated:
		return fmt.Sprintf("201 ride %d charged %s", a.rideID, a.chargeID)
	case OutcomeCancelled:
		return fmt.Sprintf("200 ride %d cancelled, refunded %s", a.rideID, a.refundID)
	}
	return fmt.Sprintf("%d %s", a.statusCode, a.code)
}

func (c *checker) checkOutcomeGroup(uk userKey, outcomes []ClientOutcome) {
	// The distinct final answers, in the order first heard. Refusals that are not stored on the
	// key (a 422 for reused parameters, say) are answers to a different request and don't count.
	var answers []answer
	for _, o := range outcomes {
		var a answer
		switch {
		case o.Kind == OutcomeCreated:
			a = answer{kind: OutcomeCreated, rideID: o.RideID, chargeID: o.ChargeID}
		case o.Kind == OutcomeCancelled:
			a = answer{kind: OutcomeCancelled, rideID: o.RideID, chargeID: o.ChargeID, refundID: o.RefundID}
		case o.Kind == OutcomeRefused && isFinalRefusal(o.StatusCode, o.Code):
			a = answer{kind: OutcomeRefused, statusCode: o.StatusCode, code: o.Code}
		default:
			continue
		}
		if !containsAnswer(answers, a) {
			answers = append(answers, a)
		}
	}
	who := fmt.Sprintf("key %q of user %d", uk.key, uk.userID)
	if len(answers) > 1 {
		c.violate(RuleOutcomeConflict, "%s: clients were told %d different things: %v", who, len(answers), answers)
	}

	key := c.keysByUserKey[uk]
	for _, a := range answers {
		switch {
		case key == nil:
			c.violate(RuleOutcomeContradicted, "%s: a client was told %s, but the database has no such key", who, a)
		case a.kind == OutcomeCreated:
			c.checkCreatedAnswer(key, a)
		case a.kind == OutcomeCancelled:
			c.checkCancelledAnswer(key, a)
		case key.ResponseCode == nil || *key.ResponseCode != a.statusCode || optString(key.ResponseProblemCode) != a.code:
			// By code as well as status: a 402 card_declined and a 402 payment_rejected tell a
			// rider different things, and a client that heard one while the key stores the other
			// was told something the database does not say.
			c.violate(RuleOutcomeContradicted, "a client was told %s, but %s%s", a, describeKey(key), c.describeKeyRide(key))
		}
	}
}

// checkCreatedAnswer holds a 201 a client saw to the key and ride rows.
func (c *checker) checkCreatedAnswer(key *keyRow, a answer) {
	ride := c.ridesByID[a.rideID]
	switch {
	case key.ResponseCode == nil || *key.ResponseCode != 201:
		c.violate(RuleOutcomeContradicted, "a client was told %s, but %s did not finish with 201%s", a, describeKey(key), c.describeKeyRide(key))
	case ride == nil:
		c.violate(RuleOutcomeContradicted, "a client was told %s by %s, but there is no ride %d", a, describeKey(key), a.rideID)
	case ride.IdempotencyKeyID == nil || *ride.IdempotencyKeyID != key.ID:
		c.violate(RuleOutcomeContradicted, "a client was told %s by %s, but ride %d belongs to key %s",
			a, describeKey(key), ride.ID, optInt(ride.IdempotencyKeyID))
	case optString(ride.StripeChargeID) != a.chargeID:
		c.violate(RuleOutcomeContradicted, "a client was told %s by %s, but ride %d records charge %s",
			a, describeKey(key), ride.ID, optString(ride.StripeChargeID))
	}
}

// checkCancelledAnswer holds a cancel's 200 a client saw to the key and ride rows: the key
// finished with 200 and claimed the ride, which records the refund the client was told of. Two
// keys that both told a client they cancelled one ride cannot both pass: a ride is claimed by
// one cancel.
func (c *checker) checkCancelledAnswer(key *keyRow, a answer) {
	ride := c.ridesByID[a.rideID]
	switch {
	case !isCancel(key) || key.ResponseCode == nil || *key.ResponseCode != 200:
		c.violate(RuleOutcomeContradicted, "a client was told %s, but %s did not finish a cancel with 200%s", a, describeKey(key), c.describeKeyRide(key))
	case ride == nil:
		c.violate(RuleOutcomeContradicted, "a client was told %s by %s, but there is no ride %d", a, describeKey(key), a.rideID)
	case ride.CancelIdempotencyKeyID == nil || *ride.CancelIdempotencyKeyID != key.ID:
		c.violate(RuleOutcomeContradicted, "a client was told %s by %s, but ride %d was claimed by cancel key %s",
			a, describeKey(key), ride.ID, optInt(ride.CancelIdempotencyKeyID))
	case optString(ride.StripeRefundID) != a.refundID:
		c.violate(RuleOutcomeContradicted, "a client was told %s by %s, but ride %d records refund %s",
			a, describeKey(key), ride.ID, optString(ride.StripeRefundID))
	}
}

func (c *checker) describeKeyRide(key *keyRow) string {
	if isCancel(key) {
		return c.describeCancelRide(key)
	}
	rides := c.ridesByKeyID[key.ID]
	if len(rides) == 0 {
		return ", and has no ride"
	}
	return fmt.Sprintf(", and has ride %d charged %s", rides[0].ID, optString(rides[0].StripeChargeID))
}

// isFinalRefusal reports whether a refusal is one the API stores on the key and replays to
// every later call: a 402, a 500 payment_needs_review, or a cancel's 404 or 409 that says why
// the ride cannot be cancelled (not a 409 idempotency_key_in_use, which a retry outlasts).
func isFinalRefusal(status int, code string) bool {
	return status == http.StatusPaymentRequired ||
		(status == http.StatusInternalServerError && code == codePaymentNeedsReview) ||
		(status == http.StatusConflict && slices.Contains(cancelFinalCodes, code)) ||
		(status == http.StatusNotFound && code == codeNotFound)
}

func containsAnswer(answers []answer, a answer) bool {
	for _, b := range answers {
		if b == a {
			return true
		}
	}
	return false
}
