package invariants

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

// testBundle is one test's world: a fresh database with a rider, and the observations a healthy
// run would make of it. Tests add rows and observations, most of them broken on purpose.
type testBundle struct {
	pool     *pgxpool.Pool
	userID   int64
	email    string
	customer string
	observed Observed
}

var seq atomic.Int64

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{pool: dbtest.NewPool(t), observed: Observed{Mailbox: &Mailbox{}, Webhooks: &Webhooks{}}}
	n := seq.Add(1)
	b.email = fmt.Sprintf("rider%d@example.com", n)
	b.customer = fmt.Sprintf("cus_%d", n)
	b.exec(t, `INSERT INTO users (email, stripe_customer_id, api_token_hash) VALUES ($1, $2, sha256($3::bytea))`,
		b.email, b.customer, []byte(b.email))
	b.scan(t, `SELECT id FROM users WHERE email = $1`, []any{b.email}, &b.userID)
	return b
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (b *testBundle) scan(t *testing.T, sql string, args []any, dest ...any) {
	t.Helper()
	if err := b.pool.QueryRow(t.Context(), sql, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// booking is a ride booked the healthy way: key finished with 201, ride charged and receipted,
// the charge at Stripe, the client told, the email delivered.
type booking struct {
	keyID     int64
	key       string
	stripeKey string
	rideID    int64
	chargeID  string
	messageID string
}

// insertKey inserts the idempotency key of a booking at recoveryPoint, unfinished, and locked
// if locked says so.
func (b *testBundle) insertKey(t *testing.T, recoveryPoint string, locked bool) (id int64, key, stripeKey string) {
	t.Helper()
	return b.insertKeyFor(t, "/rides", recoveryPoint, locked)
}

// insertKeyFor inserts the idempotency key of a request to path, as insertKey does.
func (b *testBundle) insertKeyFor(t *testing.T, path, recoveryPoint string, locked bool) (id int64, key, stripeKey string) {
	t.Helper()
	n := seq.Add(1)
	key = fmt.Sprintf("client-key-%020d", n)
	stripeKey = fmt.Sprintf("stripe-key-%020d", n)
	b.scan(t, `
		INSERT INTO idempotency_keys (idempotency_key, locked_at, locked_until, lock_generation,
		                              request_method, request_params, request_path, origin_ip,
		                              recovery_point, stripe_idempotency_key, user_id)
		VALUES ($1, CASE WHEN $2 THEN now() END, CASE WHEN $2 THEN now() + interval '5 seconds' END, 1,
		        'POST', '{}', $6, '127.0.0.1', $3, $4, $5)
		RETURNING id`, []any{key, locked, recoveryPoint, stripeKey, b.userID, path}, &id)
	return id, key, stripeKey
}

// insertRide inserts a ride of keyID, charged with chargeID unless it is empty, with a receipt
// recorded when messageID is set.
func (b *testBundle) insertRide(t *testing.T, keyID int64, chargeID, messageID string) int64 {
	t.Helper()
	var id int64
	b.scan(t, `
		INSERT INTO rides (idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon,
		                   stripe_charge_id, receipt_sent_at, receipt_message_id, user_id)
		VALUES ($1, 0, 0, 1, 1, NULLIF($2, ''), CASE WHEN $3 <> '' THEN now() END, NULLIF($3, ''), $4)
		RETURNING id`, []any{keyID, chargeID, messageID, b.userID}, &id)
	return id
}

// finishKey stores a response on a key, the way the last phase does.
func (b *testBundle) finishKey(t *testing.T, keyID int64, status int, body string) {
	t.Helper()
	b.exec(t, `UPDATE idempotency_keys SET recovery_point = 'finished', locked_at = NULL,
		response_code = $2, response_body = $3::jsonb WHERE id = $1`, keyID, status, body)
}

func createdBody(rideID int64, chargeID string) string {
	return fmt.Sprintf(`{"message": "Ride booked", "ride": {"id": %d, "stripe_charge_id": %q}}`, rideID, chargeID)
}

// book adds a healthy booking to the database and to every observation.
func (b *testBundle) book(t *testing.T) *booking {
	t.Helper()
	bk := &booking{}
	bk.keyID, bk.key, bk.stripeKey = b.insertKey(t, "started", false)
	n := seq.Add(1)
	bk.chargeID = fmt.Sprintf("ch_%d", n)
	bk.messageID = fmt.Sprintf("<ride-%d.receipt@rocketrides.example>", n)
	bk.rideID = b.insertRide(t, bk.keyID, bk.chargeID, bk.messageID)
	b.finishKey(t, bk.keyID, 201, createdBody(bk.rideID, bk.chargeID))

	b.observed.Charges = append(b.observed.Charges, b.charge(bk.chargeID, bk.stripeKey, bk.key))
	b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
		UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeCreated, RideID: bk.rideID, ChargeID: bk.chargeID,
	})
	b.observed.Mailbox.Emails = append(b.observed.Mailbox.Emails, Email{MessageID: bk.messageID, To: []string{b.email}})
	b.emit(t, "charge.succeeded", bk.chargeID, 0, false) // a type the webhook ignores
	return bk
}

// charge is a succeeded $20.00 charge of the bundle's rider: the price written out, as the
// checker writes it, so that neither follows phases.RideAmountCents. Its metadata names the
// request it was made for, as the API's charges do, unless clientKey is empty.
func (b *testBundle) charge(id, stripeKey, clientKey string) Charge {
	ch := Charge{
		ID: id, Amount: 2000, Currency: "usd", Customer: b.customer,
		Status: ChargeStatusSucceeded, IdempotencyKey: stripeKey,
	}
	if clientKey != "" {
		ch.Metadata = map[string]string{"rider_id": fmt.Sprint(b.userID), "idempotency_key": clientKey}
	}
	return ch
}

// decline adds a request whose card was declined: a ride without charge, a failed charge at
// Stripe, and a stored 402.
func (b *testBundle) decline(t *testing.T) (keyID int64, key string) {
	t.Helper()
	keyID, key, stripeKey := b.insertKey(t, "started", false)
	rideID := b.insertRide(t, keyID, "", "")
	b.exec(t, `UPDATE rides SET status = 'declined' WHERE id = $1`, rideID)
	b.finishKey(t, keyID, 402, `{"status": 402, "code": "card_declined"}`)
	failed := b.charge(fmt.Sprintf("ch_declined_%d", seq.Add(1)), stripeKey, key)
	failed.Status = "failed"
	b.observed.Charges = append(b.observed.Charges, failed)
	b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
		UserID: b.userID, IdempotencyKey: key, Kind: OutcomeRefused, StatusCode: 402, Code: "card_declined",
	})
	return keyID, key
}

// needsReview adds a request the API set aside for review: a ride without charge, its key
// finished with a 500 payment_needs_review, recorded in abandoned_requests, and the client told.
func (b *testBundle) needsReview(t *testing.T) (keyID int64, key, stripeKey string, rideID int64) {
	t.Helper()
	keyID, key, stripeKey = b.insertKey(t, "started", false)
	rideID = b.insertRide(t, keyID, "", "")
	b.finishKey(t, keyID, 500, `{"status": 500, "code": "payment_needs_review"}`)
	b.recordForReview(t, keyID, key, rideID)
	b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
		UserID: b.userID, IdempotencyKey: key, Kind: OutcomeRefused, StatusCode: 500, Code: "payment_needs_review",
	})
	return keyID, key, stripeKey, rideID
}

// recordForReview records a key in abandoned_requests, with its ride unless rideID is 0.
func (b *testBundle) recordForReview(t *testing.T, keyID int64, key string, rideID int64) {
	t.Helper()
	b.exec(t, `INSERT INTO abandoned_requests (reason, idempotency_key_id, idempotency_key, user_id, request_params,
		recovery_point, key_created_at, key_last_run_at, ride_id)
		VALUES ('stripe_replayed_error', $1, $2, $3, '{}', 'ride_created', now(), now(), NULLIF($4::bigint, 0))`, keyID, key, b.userID, rideID)
}

// insertReceiptJob inserts a River receipt job for rideID in state.
func (b *testBundle) insertReceiptJob(t *testing.T, rideID int64, state string) {
	t.Helper()
	b.insertReceiptJobOf(t, jobargs.SendRideReceiptKind, rideID, state)
}

// cancellation is a booking cancelled the healthy way: its cancel key finished with 200, the ride
// cancelled with its refund and refund receipt, the refund at Stripe under the cancel key's
// Stripe key and the charge refunded in full, the webhook's event applied, the client told, the
// refund receipt delivered.
type cancellation struct {
	keyID     int64
	key       string
	stripeKey string
	refundID  string
	messageID string
}

func cancelPath(rideID int64) string { return fmt.Sprintf("/rides/%d/cancel", rideID) }

func cancelledBody(rideID int64, chargeID, refundID string) string {
	return fmt.Sprintf(`{"message": "Ride cancelled", "ride": {"id": "%d", "stripe_charge_id": %q, "status": "cancelled", "stripe_refund_id": %q}}`,
		rideID, chargeID, refundID)
}

// cancel cancels bk the healthy way, in the database and in every observation.
func (b *testBundle) cancel(t *testing.T, bk *booking) *cancellation {
	t.Helper()
	cn := &cancellation{}
	cn.keyID, cn.key, cn.stripeKey = b.insertKeyFor(t, cancelPath(bk.rideID), "started", false)
	n := seq.Add(1)
	cn.refundID = fmt.Sprintf("re_%d", n)
	cn.messageID = fmt.Sprintf("<ride-%d.refund-receipt@rocketrides.example>", n)
	b.exec(t, `UPDATE rides SET status = 'cancelled', stripe_refund_id = $2, cancel_idempotency_key_id = $3,
		refund_receipt_sent_at = now(), refund_receipt_message_id = $4 WHERE id = $1`, bk.rideID, cn.refundID, cn.keyID, cn.messageID)
	b.finishKey(t, cn.keyID, 200, cancelledBody(bk.rideID, bk.chargeID, cn.refundID))

	b.observed.Refunds = append(b.observed.Refunds, b.refund(cn.refundID, bk.chargeID, cn.stripeKey, cn.key))
	b.chargeAt(t, bk.chargeID).Refunded, b.chargeAt(t, bk.chargeID).AmountRefunded = true, 2000
	b.emit(t, "charge.refunded", bk.chargeID, bk.rideID, true)
	b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{UserID: b.userID, IdempotencyKey: cn.key,
		Kind: OutcomeCancelled, RideID: bk.rideID, ChargeID: bk.chargeID, RefundID: cn.refundID})
	b.observed.Mailbox.Emails = append(b.observed.Mailbox.Emails, Email{MessageID: cn.messageID, To: []string{b.email}})
	return cn
}

// refuseCancel adds a cancel of bk that was refused for good with a 409 of code: its key
// finished with it, and its client told.
func (b *testBundle) refuseCancel(t *testing.T, bk *booking, code string) (keyID int64, key string) {
	t.Helper()
	keyID, key, _ = b.insertKeyFor(t, cancelPath(bk.rideID), "started", false)
	b.finishKey(t, keyID, 409, fmt.Sprintf(`{"status": 409, "code": %q}`, code))
	b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
		UserID: b.userID, IdempotencyKey: key, Kind: OutcomeRefused, StatusCode: 409, Code: code,
	})
	return keyID, key
}

// dashboardRefund refunds bk from Stripe's dashboard, as the run would: the refund under no
// key, listed among the run's own, the event applied, the ride refunded.
func (b *testBundle) dashboardRefund(t *testing.T, bk *booking) string {
	t.Helper()
	id := fmt.Sprintf("re_dashboard_%d", seq.Add(1))
	b.observed.Refunds = append(b.observed.Refunds, b.refund(id, bk.chargeID, "", ""))
	b.observed.DashboardRefunds = append(b.observed.DashboardRefunds, id)
	b.chargeAt(t, bk.chargeID).Refunded, b.chargeAt(t, bk.chargeID).AmountRefunded = true, 2000
	b.emit(t, "charge.refunded", bk.chargeID, bk.rideID, true)
	b.exec(t, `UPDATE rides SET status = 'refunded' WHERE id = $1`, bk.rideID)
	return id
}

// dispute has the rider's bank dispute bk: the charge disputed, the event applied, the ride
// disputed.
func (b *testBundle) dispute(t *testing.T, bk *booking) {
	t.Helper()
	b.chargeAt(t, bk.chargeID).Disputed = true
	b.emit(t, "charge.dispute.created", bk.chargeID, bk.rideID, true)
	b.exec(t, `UPDATE rides SET status = 'disputed' WHERE id = $1`, bk.rideID)
}

// refund is a succeeded $20.00 refund of chargeID, under stripeKey (none from the dashboard),
// with the metadata the API sends unless clientKey is empty.
func (b *testBundle) refund(id, chargeID, stripeKey, clientKey string) Refund {
	rf := Refund{ID: id, Charge: chargeID, Amount: 2000, Currency: "usd", Status: "succeeded", IdempotencyKey: stripeKey}
	if clientKey != "" {
		rf.Metadata = map[string]string{"rider_id": fmt.Sprint(b.userID), "idempotency_key": clientKey}
	}
	return rf
}

// chargeAt returns the observed charge id, to change what Stripe shows of it.
func (b *testBundle) chargeAt(t *testing.T, id string) *Charge {
	t.Helper()
	for i := range b.observed.Charges {
		if b.observed.Charges[i].ID == id {
			return &b.observed.Charges[i]
		}
	}
	t.Fatalf("no observed charge %s", id)
	return nil
}

// emit adds an event of typ about chargeID to what Stripe emitted, as the Stripe Event object
// it delivers, and, if recorded, the row of stripe_events that applied it to rideID (0: none).
func (b *testBundle) emit(t *testing.T, typ, chargeID string, rideID int64, recorded bool) string {
	t.Helper()
	id := fmt.Sprintf("evt_%d", seq.Add(1))
	object := map[string]any{"id": chargeID, "object": "charge", "refunded": typ == "charge.refunded"}
	if typ == "charge.dispute.created" {
		object = map[string]any{"id": fmt.Sprintf("dp_%d", seq.Add(1)), "object": "dispute", "charge": chargeID}
	}
	raw, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "data": map[string]any{"object": object}})
	if err != nil {
		t.Fatal(err)
	}
	b.observed.Webhooks.Events = append(b.observed.Webhooks.Events, raw)
	if recorded {
		b.exec(t, `INSERT INTO stripe_events (id, type, created_at, ride_id) VALUES ($1, $2, now(), NULLIF($3::bigint, 0))`, id, typ, rideID)
	}
	return id
}

// insertReceiptJobOf inserts a River job of kind for rideID in state.
func (b *testBundle) insertReceiptJobOf(t *testing.T, kind string, rideID int64, state string) {
	t.Helper()
	b.exec(t, `INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at, attempted_at, attempt)
		VALUES (jsonb_build_object('ride_id', $1::bigint::text), $2, 10, 'default', $3::river_job_state,
		        CASE WHEN $3 IN ('completed', 'cancelled', 'discarded') THEN now() END,
		        CASE WHEN $3 <> 'available' THEN now() END, CASE WHEN $3 = 'available' THEN 0 ELSE 1 END)`,
		rideID, kind, state)
}

// check runs Check and requires exactly the rules want to have fired.
func (b *testBundle) check(t *testing.T, want ...Rule) *Report {
	t.Helper()
	report, err := Check(t.Context(), b.pool, b.observed)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if got := report.Rules(); !slices.Equal(got, want) {
		t.Errorf("want rules %v broken, got %v; violations:", want, got)
		for _, v := range report.Violations {
			t.Errorf("  %s", v)
		}
	}
	return report
}

func TestCheck(t *testing.T) {
	t.Parallel()

	t.Run("HealthyStatePasses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		bk := b.book(t)
		b.decline(t)
		// A double tap told the same ride twice, and a client that gave up: both honest.
		b.observed.Outcomes = append(b.observed.Outcomes,
			ClientOutcome{UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeCreated, RideID: bk.rideID, ChargeID: bk.chargeID},
			ClientOutcome{UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeUnknown},
			ClientOutcome{UserID: b.userID, IdempotencyKey: "never-reached-the-server-000", Kind: OutcomeUnknown},
		)
		report := b.check(t)
		if report.Keys != 3 || report.KeysCreated != 2 || report.KeysRefused != 1 || report.Rides != 3 ||
			report.ChargedRides != 2 || report.ReceiptsRecorded != 2 || report.SucceededCharges != 2 ||
			report.FailedCharges != 1 || report.Emails != 2 || report.DuplicateEmails != 0 || !report.OK() {
			t.Errorf("unexpected counts: %+v", report)
		}
	})

	t.Run("CreatedWithoutRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyID, _, _ := b.insertKey(t, "started", false)
		b.finishKey(t, keyID, 201, createdBody(999, "ch_nowhere"))
		b.check(t, RuleCreatedWithoutRide)
	})

	t.Run("CreatedRideUncharged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyID, _, _ := b.insertKey(t, "started", false)
		rideID := b.insertRide(t, keyID, "", "")
		b.exec(t, `UPDATE idempotency_keys SET recovery_point = 'finished', locked_at = NULL, response_code = 201,
			response_body = jsonb_build_object('ride', jsonb_build_object('id', $2::bigint, 'stripe_charge_id', null))
			WHERE id = $1`, keyID, rideID)
		// Uncharged, it has no Stripe charge and can have no receipt either.
		b.check(t, RuleCreatedRideUncharged, RuleCreatedChargeCount, RuleReceiptMissing)
	})

	t.Run("CreatedResponseMismatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.exec(t, `UPDATE idempotency_keys SET response_body = $2::jsonb WHERE id = $1`, bk.keyID, createdBody(bk.rideID+1, bk.chargeID))
		b.check(t, RuleCreatedResponseMismatch)
	})

	t.Run("CreatedWithoutStripeCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		b.observed.Charges = nil
		b.check(t, RuleCreatedChargeCount, RuleChargeMismatch)
	})

	t.Run("ChargedTwiceUnderOneStripeKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_second", bk.stripeKey, bk.key))
		report := b.check(t, RuleCreatedChargeCount, RuleChargeDuplicate, RuleChargeOrphan)
		if n := countRule(report, RuleChargeDuplicate); n != 1 {
			t.Errorf("want the duplicate reported once although it shares Stripe key and ride, got %d", n)
		}
	})

	// Two Stripe keys for one request: what a lost commit made of a Stripe key drawn at random.
	t.Run("ChargedTwiceForOneRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_other_key", "stripe-key-from-elsewhere-0001", bk.key))
		b.check(t, RuleChargeDuplicate, RuleChargeOrphan)
	})

	t.Run("OrphanCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_orphan", "", ""))
		report := b.check(t, RuleChargeOrphan)
		if d := report.Violations[0].Detail; !strings.Contains(d, "ch_orphan") {
			t.Errorf("want the charge named, got %q", d)
		}
	})

	t.Run("ChargeUnderReviewIsNoOrphan", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, key, stripeKey, _ := b.needsReview(t)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_unsure", stripeKey, key))
		report := b.check(t)
		if len(report.ForReview) != 1 || !strings.Contains(report.ForReview[0], "ch_unsure") {
			t.Errorf("want the request listed for review with the charge Stripe holds, got %q", report.ForReview)
		}
	})

	// Only a request the API set aside, and told its client so, may leave Stripe's charge
	// unrecorded: a review record for a key that finished otherwise excuses nothing.
	t.Run("ChargeOfAKeyThatWasNotToldReviewIsAnOrphan", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyID, key := b.decline(t)
		var stripeKey string
		var rideID int64
		b.scan(t, `SELECT k.stripe_idempotency_key, r.id FROM idempotency_keys k JOIN rides r ON r.idempotency_key_id = k.id
			WHERE k.id = $1`, []any{keyID}, &stripeKey, &rideID)
		b.recordForReview(t, keyID, key, rideID)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_behind_a_decline", stripeKey, key))
		b.check(t, RuleChargeOrphan)
	})

	// A request set aside for review is one whose charge the API could not confirm: a ride of
	// it that records a charge was answered "needs review" although the charge was known.
	t.Run("ChargedButSetAsideForReview", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, key, stripeKey, rideID := b.needsReview(t)
		b.exec(t, `UPDATE rides SET stripe_charge_id = 'ch_known' WHERE id = $1`, rideID)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_known", stripeKey, key))
		b.check(t, RuleChargedNotCreated)
	})

	t.Run("ChargeOfWrongAmount", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		b.observed.Charges[0].Amount = 4000
		b.check(t, RuleChargeMismatch)
	})

	t.Run("ChargeOfWrongCurrency", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		b.observed.Charges[0].Currency = "eur"
		b.check(t, RuleChargeMismatch)
	})

	t.Run("KeyChargeIsNotTheRides", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Charges = []Charge{b.charge("ch_not_recorded", bk.stripeKey, bk.key)}
		// The ride's charge is unknown to Stripe, and Stripe's is unknown to the rides.
		b.check(t, RuleChargeMismatch, RuleChargeOrphan)
	})

	t.Run("ChargedButRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyID, key, stripeKey := b.insertKey(t, "started", false)
		b.insertRide(t, keyID, "ch_taken", "")
		b.finishKey(t, keyID, 402, `{"status": 402, "code": "card_declined"}`)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_taken", stripeKey, key))
		b.check(t, RuleChargedNotCreated)
	})

	t.Run("ReceiptNotRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.exec(t, `UPDATE rides SET receipt_sent_at = NULL, receipt_message_id = NULL WHERE id = $1`, bk.rideID)
		b.exec(t, `INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
			VALUES (jsonb_build_object('ride_id', $1::bigint::text), $2, 10, 'default', 'discarded', now())`, bk.rideID, jobargs.SendRideReceiptKind)
		b.observed.Mailbox.Emails = nil
		report := b.check(t, RuleReceiptMissing)
		if d := report.Violations[0].Detail; !strings.Contains(d, "discarded") {
			t.Errorf("want the discarded job named, got %q", d)
		}
	})

	t.Run("ReceiptRecordedButNeverMailed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		b.observed.Mailbox.Emails = nil
		b.check(t, RuleReceiptMissing)

		b.observed.Mailbox = nil // without a mailbox, only the database is checked
		b.check(t)
	})

	t.Run("ReceiptMailedTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.book(t)
		b.observed.Mailbox.Emails = append(b.observed.Mailbox.Emails, b.observed.Mailbox.Emails[0])
		if report := b.check(t); report.DuplicateEmails != 1 || len(report.Duplicates) != 1 {
			t.Errorf("want the copy counted and described, got %d and %q", report.DuplicateEmails, report.Duplicates)
		}
		b.observed.Mailbox.StrictDuplicates = true
		b.check(t, RuleReceiptEmailDuplicate)
	})

	t.Run("EmailNoReceiptAccountsFor", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Mailbox.Emails = append(b.observed.Mailbox.Emails, Email{MessageID: "<stray@example>", To: []string{b.email}})
		b.check(t, RuleReceiptEmailUnmatched)

		b.observed.Mailbox.Emails = []Email{{MessageID: bk.messageID, To: []string{"someone.else@example.com"}}}
		b.check(t, RuleReceiptEmailUnmatched)
	})

	t.Run("KeyLeftLocked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyID, _, _ := b.insertKey(t, "ride_created", true)
		b.insertRide(t, keyID, "", "")
		b.check(t, RuleKeyLocked)
	})

	t.Run("ChargedKeyLeftLockedIsReportedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyID, key, stripeKey := b.insertKey(t, "charge_created", true)
		b.insertRide(t, keyID, "ch_pending", "")
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_pending", stripeKey, key))
		if report := b.check(t, RuleKeyLocked); len(report.Violations) != 1 {
			t.Errorf("want one violation, got %v", report.Violations)
		}
	})

	t.Run("KeyLeftUnfinished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insertKey(t, "started", false)
		b.check(t, RuleKeyUnfinished)
	})

	// Recording a request for review finishes its key, or deletes it: a key recorded for review
	// that is still locked, or unfinished, is left half done like any other.
	t.Run("UnfinishedKeyRecordedForReview", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lockedID, lockedKey, _ := b.insertKey(t, "charge_created", true)
		b.recordForReview(t, lockedID, lockedKey, 0)
		b.check(t, RuleKeyLocked)

		unfinishedID, unfinishedKey, _ := b.insertKey(t, "ride_created", false)
		b.recordForReview(t, unfinishedID, unfinishedKey, 0)
		b.check(t, RuleKeyLocked, RuleKeyUnfinished)
	})

	t.Run("StagedJobLeft", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(t, `INSERT INTO staged_jobs (job_name, job_args, user_id) VALUES ($1, '{"ride_id": 1}', 1)`, jobargs.SendRideReceiptKind)
		b.check(t, RuleStagedJobLeft)
	})

	t.Run("ReceiptJobPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, state := range []string{"retryable", "running"} {
			b.insertReceiptJob(t, b.book(t).rideID, state)
		}
		if report := b.check(t, RuleReceiptJobPending); len(report.Violations) != 2 {
			t.Errorf("want the retryable and the running job, got %v", report.Violations)
		}
	})

	t.Run("ReceiptJobDuplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A ride whose receipt gave up, and was retried by an operator: one live job.
		retried := b.book(t)
		b.insertReceiptJob(t, retried.rideID, "discarded")
		b.insertReceiptJob(t, retried.rideID, "cancelled")
		b.insertReceiptJob(t, retried.rideID, "completed")
		b.check(t)

		// A ride whose receipt two jobs sent.
		twice := b.book(t)
		b.insertReceiptJob(t, twice.rideID, "completed")
		b.insertReceiptJob(t, twice.rideID, "completed")
		report := b.check(t, RuleReceiptJobDuplicate)
		if len(report.Violations) != 1 || !strings.Contains(report.Violations[0].Detail, fmt.Sprintf("ride %d ", twice.rideID)) {
			t.Errorf("want one violation naming ride %d, got %v", twice.rideID, report.Violations)
		}

		// One still to run next to one that ran: the receipt is bound to go out twice.
		again := b.book(t)
		b.insertReceiptJob(t, again.rideID, "completed")
		b.insertReceiptJob(t, again.rideID, "available")
		b.check(t, RuleReceiptJobDuplicate, RuleReceiptJobPending)
	})

	t.Run("TwoRidesToldForOneKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		other := b.book(t)
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
			UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeCreated, RideID: other.rideID, ChargeID: other.chargeID,
		})
		b.check(t, RuleOutcomeConflict, RuleOutcomeContradicted)
	})

	t.Run("RideAndRefusalToldForOneKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
			UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeRefused, StatusCode: 402, Code: "card_declined",
		})
		b.check(t, RuleOutcomeConflict, RuleOutcomeContradicted)
	})

	t.Run("RefusalThatDoesNotCountForTheKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		// Reusing a key with other parameters is refused without touching the key's ride.
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
			UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeRefused, StatusCode: 422, Code: "idempotency_key_reused",
		})
		b.check(t)
	})

	t.Run("SuccessTheDatabaseDoesNotKnow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Outcomes = []ClientOutcome{
			{UserID: b.userID, IdempotencyKey: "no-such-key-in-the-database", Kind: OutcomeCreated, RideID: bk.rideID, ChargeID: bk.chargeID},
			{UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeCreated, RideID: bk.rideID, ChargeID: "ch_other"},
		}
		report := b.check(t, RuleOutcomeContradicted)
		if len(report.Violations) != 2 {
			t.Errorf("want both outcomes reported, got %v", report.Violations)
		}
	})

	// Refusals are told apart by their code: a 402 payment_rejected is not the 402 card_declined
	// the key stores.
	t.Run("RefusalWithAnotherCode", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, key := b.decline(t)
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
			UserID: b.userID, IdempotencyKey: key, Kind: OutcomeRefused, StatusCode: 402, Code: "payment_rejected",
		})
		b.check(t, RuleOutcomeConflict, RuleOutcomeContradicted)

		b.observed.Outcomes = b.observed.Outcomes[:len(b.observed.Outcomes)-2] // the true answer too
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{
			UserID: b.userID, IdempotencyKey: key, Kind: OutcomeRefused, StatusCode: 402, Code: "payment_rejected",
		})
		b.check(t, RuleOutcomeContradicted)
	})

	t.Run("RefusalOfABookedRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Outcomes = []ClientOutcome{{UserID: b.userID, IdempotencyKey: bk.key, Kind: OutcomeRefused, StatusCode: 402, Code: "card_declined"}}
		b.check(t, RuleOutcomeContradicted)
	})

	t.Run("EveryViolationIsReported", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			b.insertKey(t, "started", false)
		}
		b.book(t)
		b.observed.Charges = append(b.observed.Charges, b.charge("ch_orphan_1", "", ""), b.charge("ch_orphan_2", "", ""))
		report := b.check(t, RuleKeyUnfinished, RuleChargeOrphan)
		if len(report.Violations) != 5 {
			t.Errorf("want 5 violations, got %d: %v", len(report.Violations), report.Violations)
		}
	})
}

func countRule(r *Report, rule Rule) int {
	n := 0
	for _, v := range r.Violations {
		if v.Rule == rule {
			n++
		}
	}
	return n
}

// TestCheckCancelsRefundsAndWebhooks holds the checker to the cancel, its refund and refund
// receipt, and to the webhook's effects: each rule fires on a violation seeded on purpose, and
// stays quiet on a healthy mix of bookings, cancels, dashboard refunds and disputes.
func TestCheckCancelsRefundsAndWebhooks(t *testing.T) {
	t.Parallel()

	t.Run("HealthyStatePasses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cancelled, refunded, disputed := b.book(t), b.book(t), b.book(t)
		b.book(t)
		b.decline(t)
		cn := b.cancel(t, cancelled)
		// A second cancel of the ride, under another key, refused for good; a replay of the first.
		b.refuseCancel(t, cancelled, "ride_already_cancelled")
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{UserID: b.userID, IdempotencyKey: cn.key,
			Kind: OutcomeCancelled, RideID: cancelled.rideID, ChargeID: cancelled.chargeID, RefundID: cn.refundID})
		b.dashboardRefund(t, refunded)
		b.refuseCancel(t, refunded, "ride_already_refunded")
		b.dispute(t, disputed)
		b.insertReceiptJobOf(t, jobargs.SendRideReceiptKind, cancelled.rideID, "completed")
		b.insertReceiptJobOf(t, jobargs.SendRefundReceiptKind, cancelled.rideID, "completed")

		report := b.check(t)
		if report.Keys != 8 || report.KeysCreated != 4 || report.KeysCancelled != 1 || report.KeysRefused != 3 ||
			report.CancelledRides != 1 || report.RefundedRides != 1 || report.DisputedRides != 1 || report.Refunds != 2 ||
			report.RefundReceipts != 1 || report.StripeEvents != 3 || report.Emails != 5 || !report.OK() {
			t.Errorf("unexpected counts: %+v", report)
		}
	})

	t.Run("CancelledWithoutRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		keyID, _, _ := b.insertKeyFor(t, cancelPath(bk.rideID), "started", false)
		b.finishKey(t, keyID, 200, cancelledBody(bk.rideID, bk.chargeID, "re_nowhere"))
		b.check(t, RuleCancelResponseMismatch)
	})

	t.Run("CancelResponseNamesAnotherRefund", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		cn := b.cancel(t, bk)
		b.exec(t, `UPDATE idempotency_keys SET response_body = $2::jsonb WHERE id = $1`, cn.keyID, cancelledBody(bk.rideID, bk.chargeID, "re_other"))
		b.check(t, RuleCancelResponseMismatch)
	})

	// The cancel finished with 200, but its ride shows booked: the refund is recorded where
	// nobody sees it.
	t.Run("CancelledRideNotCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.cancel(t, bk)
		b.exec(t, `UPDATE rides SET status = 'booked' WHERE id = $1`, bk.rideID)
		b.check(t, RuleCancelResponseMismatch, RuleRefundMismatch, RuleRideStatusStale)
	})

	t.Run("CancelledWithoutStripeRefund", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cn := b.cancel(t, b.book(t))
		b.observed.Refunds = nil
		report := b.check(t, RuleCancelRefundCount, RuleRefundMismatch)
		if d := report.Violations[0].Detail; !strings.Contains(d, cn.refundID) {
			t.Errorf("want the refund named, got %q", d)
		}
	})

	t.Run("RefundedTwiceUnderOneStripeKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		cn := b.cancel(t, bk)
		b.observed.Refunds = append(b.observed.Refunds, b.refund("re_second", bk.chargeID, cn.stripeKey, cn.key))
		report := b.check(t, RuleRefundDuplicate, RuleRefundOrphan, RuleCancelRefundCount)
		if n := countRule(report, RuleRefundDuplicate); n != 1 {
			t.Errorf("want the duplicate reported once although it shares Stripe key and charge, got %d", n)
		}
	})

	// Two cancels of one ride, each under its own key, each refunding it: what a claim that did
	// not keep the second cancel out would do.
	t.Run("RefundedTwiceByTwoCancels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.cancel(t, bk)
		keyID, key, stripeKey := b.insertKeyFor(t, cancelPath(bk.rideID), "started", false)
		b.finishKey(t, keyID, 200, cancelledBody(bk.rideID, bk.chargeID, "re_second"))
		b.observed.Refunds = append(b.observed.Refunds, b.refund("re_second", bk.chargeID, stripeKey, key))
		b.check(t, RuleRefundDuplicate, RuleRefundOrphan, RuleCancelResponseMismatch)
	})

	t.Run("RefundOrphan", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.observed.Refunds = append(b.observed.Refunds, b.refund("re_orphan", bk.chargeID, "", ""))
		report := b.check(t, RuleRefundOrphan)
		if d := report.Violations[0].Detail; !strings.Contains(d, "re_orphan") {
			t.Errorf("want the refund named, got %q", d)
		}

		b.observed.DashboardRefunds = []string{"re_orphan"} // the run's own: no orphan
		b.check(t)
	})

	t.Run("RefundUnderReviewIsNoOrphan", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		keyID, key, stripeKey := b.insertKeyFor(t, cancelPath(bk.rideID), "started", false)
		b.exec(t, `UPDATE rides SET cancel_idempotency_key_id = $2 WHERE id = $1`, bk.rideID, keyID)
		b.finishKey(t, keyID, 500, `{"status": 500, "code": "payment_needs_review"}`)
		b.recordForReview(t, keyID, key, bk.rideID)
		b.observed.Refunds = append(b.observed.Refunds, b.refund("re_unsure", bk.chargeID, stripeKey, key))
		report := b.check(t)
		if len(report.ForReview) != 1 || !strings.Contains(report.ForReview[0], "re_unsure") {
			t.Errorf("want the cancel listed for review with the refund Stripe holds, got %q", report.ForReview)
		}
	})

	t.Run("RideRecordsRefundOfAnotherCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk, other := b.book(t), b.book(t)
		b.cancel(t, bk)
		b.observed.Refunds[0].Charge = other.chargeID
		b.check(t, RuleRefundMismatch)
	})

	t.Run("RefundNotInFull", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.cancel(t, b.book(t))
		b.observed.Refunds[0].Amount = 1000
		b.check(t, RuleRefundMismatch)
	})

	t.Run("RideRecordsADashboardRefund", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cn := b.cancel(t, b.book(t))
		b.observed.DashboardRefunds = []string{cn.refundID}
		b.check(t, RuleRefundMismatch)
	})

	// The schema forbids it; the auditor does not take the schema's word.
	t.Run("CancelledWithoutRefund", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.exec(t, `ALTER TABLE rides DROP CONSTRAINT rides_cancel_has_refund`)
		b.exec(t, `UPDATE rides SET status = 'cancelled' WHERE id = $1`, bk.rideID)
		b.check(t, RuleRefundMismatch)
	})

	t.Run("RefundReceiptNotRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		cn := b.cancel(t, bk)
		b.exec(t, `UPDATE rides SET refund_receipt_sent_at = NULL, refund_receipt_message_id = NULL WHERE id = $1`, bk.rideID)
		b.insertReceiptJobOf(t, jobargs.SendRefundReceiptKind, bk.rideID, "discarded")
		b.observed.Mailbox.Emails = slices.DeleteFunc(b.observed.Mailbox.Emails, func(e Email) bool { return e.MessageID == cn.messageID })
		report := b.check(t, RuleReceiptMissing)
		if d := report.Violations[0].Detail; !strings.Contains(d, "refund receipt") || !strings.Contains(d, "discarded") {
			t.Errorf("want the missing refund receipt and its discarded job named, got %q", d)
		}
	})

	t.Run("RefundReceiptRecordedButNeverMailed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cn := b.cancel(t, b.book(t))
		b.observed.Mailbox.Emails = slices.DeleteFunc(b.observed.Mailbox.Emails, func(e Email) bool { return e.MessageID == cn.messageID })
		b.check(t, RuleReceiptMissing)
	})

	t.Run("RefundReceiptMailedTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cn := b.cancel(t, b.book(t))
		b.observed.Mailbox.Emails = append(b.observed.Mailbox.Emails, Email{MessageID: cn.messageID, To: []string{b.email}})
		if report := b.check(t); report.DuplicateEmails != 1 || !strings.Contains(report.Duplicates[0], "refund receipt") {
			t.Errorf("want the copy counted and described, got %d and %q", report.DuplicateEmails, report.Duplicates)
		}
	})

	t.Run("RefundReceiptJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A ride receipt job and a refund receipt job of one ride are no duplicates.
		bk := b.book(t)
		b.cancel(t, bk)
		b.insertReceiptJobOf(t, jobargs.SendRideReceiptKind, bk.rideID, "completed")
		b.insertReceiptJobOf(t, jobargs.SendRefundReceiptKind, bk.rideID, "completed")
		b.check(t)

		b.insertReceiptJobOf(t, jobargs.SendRefundReceiptKind, bk.rideID, "completed")
		b.check(t, RuleReceiptJobDuplicate)

		pending := b.book(t)
		b.cancel(t, pending)
		b.insertReceiptJobOf(t, jobargs.SendRefundReceiptKind, pending.rideID, "retryable")
		report := b.check(t, RuleReceiptJobDuplicate, RuleReceiptJobPending)
		if !slices.ContainsFunc(report.Violations, func(v Violation) bool {
			return v.Rule == RuleReceiptJobPending && strings.Contains(v.Detail, "send_refund_receipt")
		}) {
			t.Errorf("want the pending refund receipt job named by its kind, got %v", report.Violations)
		}
	})

	t.Run("RideStatusStripeContradicts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		refunded, disputed := b.book(t), b.book(t)
		b.exec(t, `UPDATE rides SET status = 'refunded' WHERE id = $1`, refunded.rideID)
		b.exec(t, `UPDATE rides SET status = 'disputed' WHERE id = $1`, disputed.rideID)
		if report := b.check(t, RuleRideStatusContradicted); len(report.Violations) != 2 {
			t.Errorf("want both rides reported, got %v", report.Violations)
		}
		b.observed.Webhooks = nil // whether or not webhooks were delivered
		b.check(t, RuleRideStatusContradicted)
	})

	t.Run("DeclinedRideShownBooked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		declined, _ := b.decline(t)
		b.exec(t, `UPDATE rides SET status = 'booked' WHERE idempotency_key_id = $1`, declined)
		b.check(t, RuleRideStatusContradicted)
	})

	t.Run("RefundAtStripeNotOnTheRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.dashboardRefund(t, bk)
		b.exec(t, `UPDATE rides SET status = 'booked' WHERE id = $1`, bk.rideID)
		b.check(t, RuleRideStatusStale)

		b.observed.Webhooks = nil // deliveries still pending: the ride may not know yet
		b.check(t)
	})

	t.Run("DisputeAtStripeNotOnTheRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.cancel(t, bk)
		b.chargeAt(t, bk.chargeID).Disputed = true
		b.emit(t, "charge.dispute.created", bk.chargeID, bk.rideID, true)
		b.check(t, RuleRideStatusStale)
	})

	t.Run("StripeEventNeverApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		b.dispute(t, bk)
		b.emit(t, "charge.dispute.created", bk.chargeID, bk.rideID, false)
		report := b.check(t, RuleStripeEventMissing)
		if len(report.Violations) != 1 {
			t.Errorf("want only the dispute event reported, not the charge.succeeded one, got %v", report.Violations)
		}
	})

	t.Run("StripeEventMismatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk, other := b.book(t), b.book(t)
		b.dispute(t, bk)
		b.exec(t, `UPDATE stripe_events SET ride_id = $1`, other.rideID)
		b.check(t, RuleStripeEventMismatch)

		b.exec(t, `UPDATE stripe_events SET ride_id = $1`, bk.rideID)
		b.exec(t, `INSERT INTO stripe_events (id, type, created_at) VALUES ('evt_forged', 'charge.refunded', now())`)
		report := b.check(t, RuleStripeEventMismatch)
		if len(report.Violations) != 1 || !strings.Contains(report.Violations[0].Detail, "evt_forged") {
			t.Errorf("want the event Stripe never emitted reported, got %v", report.Violations)
		}
	})

	t.Run("CancelTheDatabaseDoesNotKnow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		cn := b.cancel(t, bk)
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{UserID: b.userID, IdempotencyKey: cn.key,
			Kind: OutcomeCancelled, RideID: bk.rideID, ChargeID: bk.chargeID, RefundID: "re_other"})
		b.check(t, RuleOutcomeConflict, RuleOutcomeContradicted)
	})

	// Two keys that both told their clients they cancelled the ride: only one cancel claimed it.
	t.Run("TwoCancelsToldForOneRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bk := b.book(t)
		cn := b.cancel(t, bk)
		_, key := b.refuseCancel(t, bk, "ride_already_cancelled")
		b.observed.Outcomes = append(b.observed.Outcomes, ClientOutcome{UserID: b.userID, IdempotencyKey: key,
			Kind: OutcomeCancelled, RideID: bk.rideID, ChargeID: bk.chargeID, RefundID: cn.refundID})
		b.check(t, RuleOutcomeConflict, RuleOutcomeContradicted)
	})

	t.Run("CancelRefusalTheKeyDoesNotStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cn := b.cancel(t, b.book(t))
		b.observed.Outcomes = []ClientOutcome{{UserID: b.userID, IdempotencyKey: cn.key, Kind: OutcomeRefused,
			StatusCode: 409, Code: "ride_already_cancelled"}}
		b.check(t, RuleOutcomeContradicted)

		// A 409 that a retry outlasts is no answer about the ride.
		b.observed.Outcomes = []ClientOutcome{{UserID: b.userID, IdempotencyKey: cn.key, Kind: OutcomeRefused,
			StatusCode: 409, Code: "idempotency_key_in_use"}}
		b.check(t)
	})
}
