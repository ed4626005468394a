// Package invariants checks that Rocket Rides kept its promises, after the fact: every ride
// that was booked was charged exactly once and got exactly one receipt, every ride cancelled was
// refunded exactly once and got exactly one refund receipt, Stripe holds no charge and no refund
// that no ride (or the run's own dashboard action) accounts for, every refund and dispute Stripe
// told the webhook of shows on its ride, nothing was left half done, and no client was told
// something the database contradicts. The chaos soak (lab/chaos) runs it after a storm of
// crashes and faults; it is equally an audit a person could run against a copy of production.
//
// Check looks at a quiescent system: once the processes are stopped, or at least idle, and the
// queues drained. Against a live one, requests in flight show up as locked keys.
package invariants

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Rule names one invariant; every violation says which one it broke.
type Rule string

// The invariants. Each is checked over the whole state, and every breach is reported, not just
// the first, so that one run of a soak tells the whole story.
const (
	// RuleCreatedWithoutRide: a key that finished with 201 has no ride.
	RuleCreatedWithoutRide Rule = "created_without_ride"
	// RuleCreatedRideUncharged: a key that finished with 201 has a ride without a charge.
	RuleCreatedRideUncharged Rule = "created_ride_uncharged"
	// RuleCreatedResponseMismatch: the 201 stored on a key names another ride or charge than the
	// ride row does, so replays tell clients something the database does not hold.
	RuleCreatedResponseMismatch Rule = "created_response_mismatch"
	// RuleCreatedChargeCount: a key that finished with 201 does not have exactly one succeeded
	// charge at Stripe under its Stripe idempotency key.
	RuleCreatedChargeCount Rule = "created_charge_count"
	// RuleReceiptMissing: a booked ride has no receipt recorded, a cancelled one no refund
	// receipt, or a receipt recorded never reached the mail server.
	RuleReceiptMissing Rule = "receipt_missing"
	// RuleReceiptEmailDuplicate: one receipt was delivered more than once (strict mode only).
	RuleReceiptEmailDuplicate Rule = "receipt_email_duplicate"
	// RuleReceiptEmailUnmatched: an email went out that no recorded receipt accounts for, or to
	// someone other than the ride's rider.
	RuleReceiptEmailUnmatched Rule = "receipt_email_unmatched"
	// RuleChargeOrphan: Stripe holds a succeeded charge that no ride records and no person was
	// asked to review: money taken for nothing.
	RuleChargeOrphan Rule = "charge_orphan"
	// RuleChargeDuplicate: two succeeded charges for one Stripe idempotency key, or for one ride.
	RuleChargeDuplicate Rule = "charge_duplicate"
	// RuleChargeMismatch: a ride records a charge Stripe does not hold as succeeded, or the
	// charge is for another customer or amount, or the key's charge is not the ride's.
	RuleChargeMismatch Rule = "charge_mismatch"
	// RuleChargedNotCreated: a ride was charged but its key finished with another answer than
	// 201, so the client can never learn of the charge.
	RuleChargedNotCreated Rule = "charged_not_created"
	// RuleKeyLocked: a key is still locked.
	RuleKeyLocked Rule = "key_locked"
	// RuleKeyUnfinished: a key never finished.
	RuleKeyUnfinished Rule = "key_unfinished"
	// RuleStagedJobLeft: a staged job never reached the job queue.
	RuleStagedJobLeft Rule = "staged_job_left"
	// RuleReceiptJobPending: a receipt job (of a ride or of its refund) is neither completed,
	// cancelled nor discarded.
	RuleReceiptJobPending Rule = "receipt_job_pending"
	// RuleReceiptJobDuplicate: a ride has more than one live receipt job of one kind (neither
	// cancelled nor discarded), so that receipt was mailed, or is bound to be, more than once.
	RuleReceiptJobDuplicate Rule = "receipt_job_duplicate"
	// RuleCancelResponseMismatch: a cancel key that finished with 200 claimed no ride, or its
	// ride is not cancelled, or the stored 200 names another ride or refund than the ride row
	// does, so replays tell clients something the database does not hold.
	RuleCancelResponseMismatch Rule = "cancel_response_mismatch"
	// RuleCancelRefundCount: a cancel key that finished with 200 does not have exactly one
	// refund at Stripe under its Stripe idempotency key.
	RuleCancelRefundCount Rule = "cancel_refund_count"
	// RuleRefundOrphan: Stripe holds a refund that no ride records, that the run did not make
	// from the dashboard, and that no person was asked to review: money given back for nothing
	// anyone knows of.
	RuleRefundOrphan Rule = "refund_orphan"
	// RuleRefundDuplicate: a charge was refunded more than once, or two refunds were made under
	// one Stripe key: a ride cancelled twice.
	RuleRefundDuplicate Rule = "refund_duplicate"
	// RuleRefundMismatch: a ride records a refund that Stripe does not hold as succeeded, or one
	// of another charge or not in full, or shows cancelled without a refund, or records a refund
	// but shows booked or refunded.
	RuleRefundMismatch Rule = "refund_mismatch"
	// RuleRideStatusContradicted: a ride shows refunded or disputed while Stripe shows its
	// charge neither refunded in full nor disputed; or, uncharged, is not declined when its
	// booking stored a 402, nor booked otherwise.
	RuleRideStatusContradicted Rule = "ride_status_contradicted"
	// RuleRideStatusStale: once Stripe's webhook deliveries were made, Stripe shows a ride's
	// charge refunded in full or disputed, and the ride does not show it.
	RuleRideStatusStale Rule = "ride_status_stale"
	// RuleStripeEventMissing: Stripe emitted an event of a type the webhook acts on, and
	// stripe_events does not hold it: it was never applied.
	RuleStripeEventMissing Rule = "stripe_event_missing"
	// RuleStripeEventMismatch: stripe_events holds an event Stripe never emitted, or one with
	// another type, or tied to another ride than the one its charge paid for.
	RuleStripeEventMismatch Rule = "stripe_event_mismatch"
	// RuleOutcomeConflict: calls with one key were told different things: two rides, or a ride
	// and a final refusal. That is the silent duplicate idempotency keys exist to prevent.
	RuleOutcomeConflict Rule = "outcome_conflict"
	// RuleOutcomeContradicted: a client was told something the database contradicts: a ride
	// that is not the key's, or a refusal for a key that was in fact booked and charged.
	RuleOutcomeContradicted Rule = "outcome_contradicted"
)

// Violation is one breach of one invariant, with the ids a person needs to look into it.
type Violation struct {
	Rule   Rule
	Detail string
}

func (v Violation) String() string { return string(v.Rule) + ": " + v.Detail }

// Report is what Check found: counts that describe the state, and every violation.
type Report struct {
	Keys             int // idempotency keys, of bookings and cancels
	KeysCreated      int // bookings finished with 201
	KeysCancelled    int // cancels finished with 200
	KeysRefused      int // finished with a stored error (402, 500 payment_needs_review, a cancel's 404 or 409)
	Rides            int
	ChargedRides     int
	CancelledRides   int // status cancelled: refunded by our cancel
	RefundedRides    int // status refunded: refunded from Stripe's dashboard
	DisputedRides    int // status disputed
	ReceiptsRecorded int
	SucceededCharges int
	FailedCharges    int // declined cards; they take no money
	Refunds          int // refunds at Stripe, the dashboard's included
	RefundReceipts   int // refund receipts recorded
	StripeEvents     int // events the webhook applied (rows of stripe_events)
	Emails           int // messages the mail server accepted, when a Mailbox was given
	DuplicateEmails  int // second and later deliveries of one receipt

	// Duplicates describes each receipt delivered more than once, whether or not that breaks
	// an invariant (see Mailbox.StrictDuplicates), for a soak to hold to its own allowance.
	Duplicates []string

	// ForReview describes each request recorded in abandoned_requests: the system could not
	// finish it alone and a person has to. They break no invariant, but a soak should have none.
	ForReview []string

	Violations []Violation
}

// OK reports whether no invariant was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Rules returns the distinct rules broken, sorted, for tests and summaries.
func (r *Report) Rules() []Rule {
	var rules []Rule
	for _, v := range r.Violations {
		if !slices.Contains(rules, v.Rule) {
			rules = append(rules, v.Rule)
		}
	}
	slices.Sort(rules)
	return rules
}

// Check reads the database through db in one consistent snapshot and holds it, and what was
// observed, to every invariant. The error is for failing to read, never for a violation.
func Check(ctx context.Context, db Beginner, observed Observed) (*Report, error) {
	snap, err := readSnapshot(ctx, db)
	if err != nil {
		return nil, err
	}
	c := newChecker(snap, observed)
	c.checkCreated()
	c.checkCharges()
	c.checkCancelled()
	c.checkRefunds()
	c.checkRideStatus()
	if observed.Webhooks != nil {
		c.checkStripeEvents(observed.Webhooks)
	}
	c.checkQuiescent()
	c.checkOutcomes()
	if observed.Mailbox != nil {
		c.checkMailbox(observed.Mailbox)
	}
	return c.report, nil
}

// userKey identifies an idempotency key the way clients do: keys are scoped per rider.
type userKey struct {
	userID int64
	key    string
}

// receiptJobKey names the receipt jobs of one kind for one ride.
type receiptJobKey struct {
	kind   string
	rideID int64
}

// checker holds the snapshot indexed every way the rules look it up.
type checker struct {
	snap     *snapshot
	observed Observed
	report   *Report

	keysByID           map[int64]*keyRow
	keysByUserKey      map[userKey]*keyRow
	ridesByID          map[int64]*rideRow
	ridesByKeyID       map[int64][]*rideRow // by the key that booked them
	ridesByCancelKeyID map[int64][]*rideRow // by the cancel key that claimed them
	ridesByChargeID    map[string][]*rideRow
	succeeded          map[string]Charge               // succeeded charges by id
	succeededByKey     map[string][]Charge             // succeeded charges by Stripe idempotency key
	refunds            map[string]Refund               // succeeded refunds by id
	refundsByCharge    map[string][]Refund             // succeeded refunds by charge
	refundsByKey       map[string][]Refund             // succeeded refunds by Stripe idempotency key
	dashboardRefunds   map[string]bool                 // the run's own refunds, by id
	receiptJobs        map[receiptJobKey][]riverJobRow // by kind and ride

	// reviewStripeKeys are the Stripe idempotency keys of requests that the API set aside for
	// review: recorded in abandoned_requests, and finished with a 500 payment_needs_review that
	// told the client so. A charge under such a key is no orphan: whether Stripe charged is the
	// very question the API could not settle and handed to a person, and ForReview lists the
	// charge for them. Keys of other requests recorded for review (the reaper's, which deletes
	// the key; a record pointing at a key that finished otherwise) earn no such exception. A
	// cancel set aside likewise excuses the refund under its Stripe key.
	reviewStripeKeys map[string]bool
}

func newChecker(snap *snapshot, observed Observed) *checker {
	c := &checker{
		snap:               snap,
		observed:           observed,
		report:             &Report{Keys: len(snap.keys), Rides: len(snap.rides), StripeEvents: len(snap.stripeEvents)},
		keysByID:           map[int64]*keyRow{},
		keysByUserKey:      map[userKey]*keyRow{},
		ridesByID:          map[int64]*rideRow{},
		ridesByKeyID:       map[int64][]*rideRow{},
		ridesByCancelKeyID: map[int64][]*rideRow{},
		ridesByChargeID:    map[string][]*rideRow{},
		succeeded:          map[string]Charge{},
		succeededByKey:     map[string][]Charge{},
		refunds:            map[string]Refund{},
		refundsByCharge:    map[string][]Refund{},
		refundsByKey:       map[string][]Refund{},
		dashboardRefunds:   map[string]bool{},
		receiptJobs:        map[receiptJobKey][]riverJobRow{},
		reviewStripeKeys:   map[string]bool{},
	}
	for i := range snap.keys {
		k := &snap.keys[i]
		c.keysByID[k.ID] = k
		c.keysByUserKey[userKey{k.UserID, k.IdempotencyKey}] = k
		switch {
		case k.ResponseCode == nil:
		case *k.ResponseCode == 201:
			c.report.KeysCreated++
		case *k.ResponseCode == 200 && isCancel(k):
			c.report.KeysCancelled++
		default:
			c.report.KeysRefused++
		}
	}
	for i := range snap.rides {
		r := &snap.rides[i]
		c.ridesByID[r.ID] = r
		if r.IdempotencyKeyID != nil {
			c.ridesByKeyID[*r.IdempotencyKeyID] = append(c.ridesByKeyID[*r.IdempotencyKeyID], r)
		}
		if r.CancelIdempotencyKeyID != nil {
			c.ridesByCancelKeyID[*r.CancelIdempotencyKeyID] = append(c.ridesByCancelKeyID[*r.CancelIdempotencyKeyID], r)
		}
		if r.StripeChargeID != nil {
			c.report.ChargedRides++
			c.ridesByChargeID[*r.StripeChargeID] = append(c.ridesByChargeID[*r.StripeChargeID], r)
		}
		if r.ReceiptSentAt != nil {
			c.report.ReceiptsRecorded++
		}
		if r.RefundReceiptSentAt != nil {
			c.report.RefundReceipts++
		}
		switch r.Status {
		case statusCancelled:
			c.report.CancelledRides++
		case statusRefunded:
			c.report.RefundedRides++
		case statusDisputed:
			c.report.DisputedRides++
		}
	}
	for _, ch := range observed.Charges {
		if ch.Status != ChargeStatusSucceeded {
			c.report.FailedCharges++
			continue
		}
		c.report.SucceededCharges++
		c.succeeded[ch.ID] = ch
		if ch.IdempotencyKey != "" {
			c.succeededByKey[ch.IdempotencyKey] = append(c.succeededByKey[ch.IdempotencyKey], ch)
		}
	}
	for _, rf := range observed.Refunds {
		if rf.Status != ChargeStatusSucceeded {
			continue // it gave nothing back
		}
		c.report.Refunds++
		c.refunds[rf.ID] = rf
		c.refundsByCharge[rf.Charge] = append(c.refundsByCharge[rf.Charge], rf)
		if rf.IdempotencyKey != "" {
			c.refundsByKey[rf.IdempotencyKey] = append(c.refundsByKey[rf.IdempotencyKey], rf)
		}
	}
	for _, id := range observed.DashboardRefunds {
		c.dashboardRefunds[id] = true
	}
	for _, a := range snap.abandoned {
		desc := fmt.Sprintf("abandoned request %d: key %q of user %d, ride %s, reason %s",
			a.ID, a.IdempotencyKey, a.UserID, optInt(a.RideID), a.Reason)
		if a.IdempotencyKeyID != nil {
			if k := c.keysByID[*a.IdempotencyKeyID]; k != nil && toldNeedsReview(k) {
				c.reviewStripeKeys[k.StripeIdempotencyKey] = true
				if charges := c.succeededByKey[k.StripeIdempotencyKey]; len(charges) > 0 {
					desc += ", Stripe holds " + describeCharges(charges)
				}
				if refunds := c.refundsByKey[k.StripeIdempotencyKey]; len(refunds) > 0 {
					desc += ", Stripe holds " + describeRefunds(refunds)
				}
			}
		}
		c.report.ForReview = append(c.report.ForReview, desc)
	}
	for _, j := range snap.receiptJobs {
		if j.RideID != nil {
			k := receiptJobKey{j.Kind, *j.RideID}
			c.receiptJobs[k] = append(c.receiptJobs[k], j)
		}
	}
	return c
}

// isCancel reports whether k is the key of a cancel (POST /rides/{id}/cancel) rather than of a
// booking (POST /rides).
func isCancel(k *keyRow) bool {
	return strings.HasPrefix(k.RequestPath, "/rides/") && strings.HasSuffix(k.RequestPath, "/cancel")
}

// toldNeedsReview reports whether key finished with the 500 payment_needs_review that sets a
// request aside for a person.
func toldNeedsReview(k *keyRow) bool {
	return k.ResponseCode != nil && *k.ResponseCode == 500 &&
		k.ResponseProblemCode != nil && *k.ResponseProblemCode == codePaymentNeedsReview
}

func (c *checker) violate(rule Rule, format string, args ...any) {
	c.report.Violations = append(c.report.Violations, Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

// describeKey names a key with everything needed to find it and see how far it got.
func describeKey(k *keyRow) string {
	s := fmt.Sprintf("key %d (%q of user %d, at %s, response %s", k.ID, k.IdempotencyKey, k.UserID,
		k.RecoveryPoint, optInt(k.ResponseCode))
	if k.ResponseProblemCode != nil {
		s += " " + *k.ResponseProblemCode
	}
	s += ", stripe key " + k.StripeIdempotencyKey
	if k.LockedAt != nil {
		s += ", locked at " + k.LockedAt.UTC().Format("15:04:05.000")
	}
	if k.LastError != nil {
		s += fmt.Sprintf(", last error %q", *k.LastError)
	}
	return s + ")"
}

func describeRefunds(refunds []Refund) string {
	parts := make([]string, 0, len(refunds))
	for _, rf := range refunds {
		parts = append(parts, fmt.Sprintf("%s (of %s, %d %s, key %s, stripe key %s)", rf.ID, rf.Charge, rf.Amount,
			rf.Currency, rf.Metadata[metadataIdempotencyKey], optString(nonEmpty(rf.IdempotencyKey))))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func describeCharges(charges []Charge) string {
	parts := make([]string, 0, len(charges))
	for _, ch := range charges {
		parts = append(parts, fmt.Sprintf("%s (%s, rider %s, key %s, stripe key %s)", ch.ID, ch.Status,
			ch.Metadata[metadataRiderID], ch.Metadata[metadataIdempotencyKey], ch.IdempotencyKey))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func optInt[T int | int64](v *T) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v)
}

func optString(v *string) string {
	if v == nil {
		return "none"
	}
	return *v
}
