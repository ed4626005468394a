package e2etest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/client"
)

// The cancel's scenarios of "Murphy in action": a cancel is a second request graph (started ->
// refund_created -> finished) whose foreign state mutation is a Stripe refund, and it must
// survive what a booking survives. Each scenario books a ride first, then cancels it the hard
// way, and holds the result to one refund at Stripe, the ride cancelled with that refund, and
// one refund receipt staged.

// TestMurphyAPIKilledAfterStripeRefunded: the API is SIGKILLed after Stripe refunded the ride and
// before it recorded the refund. The key stays locked at started, the ride claimed by it; the
// client's retry through another replica, or the completer once the client gave up, takes the
// key over when the dead request's lease ran out, sends the refund again under the key's Stripe
// idempotency key, and Stripe replays the refund it made: one refund.
func TestMurphyAPIKilledAfterStripeRefunded(t *testing.T) {
	t.Parallel()
	testMurphyCancelKilledAt(t, "refund_answered", true)
}

// TestMurphyAPIKilledAfterCancelClaimed: the API is SIGKILLed right after the cancel's first
// atomic phase claimed the ride, before the refund. Whoever takes the key over refunds it once.
func TestMurphyAPIKilledAfterCancelClaimed(t *testing.T) {
	t.Parallel()
	testMurphyCancelKilledAt(t, "cancel_claimed", false)
}

// testMurphyCancelKilledAt kills an API at point under a cancel, and has the client's retry
// finish the cancel, or the completer. refunded says whether Stripe refunded before the kill.
func testMurphyCancelKilledAt(t *testing.T, point string, refunded bool) {
	// crash books a ride, then kills an API at point with its cancel in flight, with another
	// replica already running.
	crash := func(t *testing.T) (s *murphyStack, booked *client.Result, key string, port int, other *murphyAPI, killedAt time.Time) {
		s = newMurphyStack(t, murphyOptions{})
		other = s.startAPI(0)
		booked, err := s.client(other.URL).CreateRide(t.Context(), murphyParams)
		if err != nil {
			t.Fatalf("error booking the ride to cancel: %v", err)
		}
		key = newKey(t)
		port, killedAt = s.crashCancelAt(point, key, booked.Ride.ID)

		k := s.key(key)
		ride := s.claimedRide(k.ID)
		if k.RecoveryPoint != "started" || !k.Locked || ride == nil || strconv.FormatInt(ride.ID, 10) != booked.Ride.ID ||
			ride.Status != "booked" || ride.RefundID != nil {
			t.Fatalf("want the dead cancel's key locked at started, ride %s claimed by it and not refunded; got %+v, ride %+v",
				booked.Ride.ID, k, ride)
		}
		if got := s.stripeRefunds(*booked.Ride.StripeChargeID); (len(got) == 1) != refunded || len(got) > 1 ||
			(refunded && got[0].IdempotencyKey != k.StripeKey) {
			t.Fatalf("want Stripe to hold %s under the key's Stripe key %s, got %+v", refundsWord(refunded), k.StripeKey, got)
		}
		return s, booked, key, port, other, killedAt
	}

	t.Run("ClientRetryThroughAnotherReplicaFinishesIt", func(t *testing.T) {
		t.Parallel()
		s, booked, key, _, other, killedAt := crash(t)
		c := s.client(other.URL)
		answers := recordAnswers(c)
		res, err := c.CancelRideWithKey(t.Context(), key, booked.Ride.ID)
		if err != nil || res.Replayed {
			t.Fatalf("want the retry to cancel the ride, got %+v, %v; the client saw %v", res, err, answers.Statuses())
		}
		requireTakeoverInTime(t, killedAt)
		t.Logf("the retry saw %v", answers.Statuses())
		s.assertCancelledOnce(key, booked, res)
		s.assertRefundReplayed(key, refunded)
	})

	t.Run("CompleterFinishesIt", func(t *testing.T) {
		t.Parallel()
		s, booked, key, port, _, _ := crash(t)
		s.waitLockExpired(key)
		if succeeded, failed := s.runCompleter(); succeeded != 1 || failed != 0 {
			t.Fatalf("want the completer to finish the cancel, got %d succeeded, %d failed", succeeded, failed)
		}
		ride := s.assertCancelledOnce(key, booked, nil)
		s.assertRefundReplayed(key, refunded)

		// The app, back at last, learns the outcome.
		answer := s.postCancel(s.startAPI(port).URL, key, booked.Ride.ID)
		if answer.Err != nil || answer.Status != http.StatusOK || answer.Header.Get("Idempotent-Replayed") != "true" ||
			answer.RideID() != ride.ID {
			t.Fatalf("want the completer's 200 for ride %d replayed to the client, got %s", ride.ID, answer)
		}
	})
}

// TestMurphyCancelTwiceAtOnceOnTwoReplicas: a rider taps cancel twice, and the two requests
// reach two API replicas at the same moment. With one key, one cancels and the other is told the
// key is in use, or gets the first one's answer replayed; with two keys, one cancels and the
// other is told, for good, that the ride is cancelled already. Either way, one refund.
func TestMurphyCancelTwiceAtOnceOnTwoReplicas(t *testing.T) {
	t.Parallel()

	// setup books a ride through one of two replicas, then slows Stripe down, so that the first
	// cancel is still inside its key's lock, and the ride's claim, when the second arrives.
	setup := func(t *testing.T) (*murphyStack, []*murphyAPI, *client.Result) {
		s := newMurphyStack(t, murphyOptions{})
		apis := []*murphyAPI{s.startAPI(0), s.startAPI(0)}
		booked, err := s.client(apis[0].URL).CreateRide(t.Context(), murphyParams)
		if err != nil {
			t.Fatalf("error booking the ride to cancel: %v", err)
		}
		s.stripeLatency(300 * time.Millisecond)
		return s, apis, booked
	}

	t.Run("SameKey", func(t *testing.T) {
		t.Parallel()
		s, apis, booked := setup(t)
		key := newKey(t)
		var answers [2]rawAnswer
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, api := range apis {
			wg.Go(func() {
				<-start
				answers[j] = s.postCancel(api.URL, key, booked.Ride.ID)
			})
		}
		close(start)
		wg.Wait()

		winner := slices.IndexFunc(answers[:], func(a rawAnswer) bool {
			return a.Err == nil && a.Status == http.StatusOK && a.Header.Get("Idempotent-Replayed") == ""
		})
		if winner < 0 {
			t.Fatalf("want one request to cancel the ride, got %s and %s", answers[0], answers[1])
		}
		switch loser := answers[1-winner]; {
		case loser.Err == nil && loser.Status == http.StatusConflict && loser.Code() == "idempotency_key_in_use" &&
			loser.Header.Get("Retry-After") == "1":
			t.Log("the other request got 409 idempotency_key_in_use")
		case loser.Err == nil && loser.Status == http.StatusOK && loser.Header.Get("Idempotent-Replayed") == "true" &&
			loser.RideID() == answers[winner].RideID():
			t.Log("the other request got the replay")
		default:
			t.Fatalf("want the other request to get 409 idempotency_key_in_use or the replay, got %s", loser)
		}

		res, err := s.client(apis[1-winner].URL).CancelRideWithKey(t.Context(), key, booked.Ride.ID)
		if err != nil || !res.Replayed || res.Attempts != 1 {
			t.Fatalf("want the loser's retry to get the cancel replayed at once, got %+v, %v", res, err)
		}
		s.assertCancelledOnce(key, booked, res)
		s.assertRefundRequests(key, 1)

		// A cancel under a new key, later, is told the ride is cancelled already, for good.
		again := newKey(t)
		for _, wantReplayed := range []bool{false, true} {
			_, err := s.client(apis[0].URL).CancelRideWithKey(t.Context(), again, booked.Ride.ID)
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "ride_already_cancelled" ||
				apiErr.Replayed != wantReplayed || apiErr.Attempts != 1 {
				t.Fatalf("want a cancel under another key told 409 ride_already_cancelled (replayed %t), got %v (%+v)", wantReplayed, err, apiErr)
			}
		}
		s.assertCancelledOnce(key, booked, res)
	})

	t.Run("TwoKeys", func(t *testing.T) {
		t.Parallel()
		s, apis, booked := setup(t)
		keys := []string{newKey(t), newKey(t)}
		var (
			results [2]*client.Result
			errs    [2]error
		)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, api := range apis {
			wg.Go(func() {
				<-start
				results[j], errs[j] = s.client(api.URL).CancelRideWithKey(t.Context(), keys[j], booked.Ride.ID)
			})
		}
		close(start)
		wg.Wait()

		winner := slices.IndexFunc(errs[:], func(err error) bool { return err == nil })
		if winner < 0 {
			t.Fatalf("want one cancel to cancel the ride, got %v and %v", errs[0], errs[1])
		}
		var apiErr *client.APIError
		if !errors.As(errs[1-winner], &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "ride_already_cancelled" {
			t.Fatalf("want the other cancel told 409 ride_already_cancelled, got %+v, %v", results[1-winner], errs[1-winner])
		}
		s.assertCancelledOnce(keys[winner], booked, results[winner])
		if k := s.key(keys[1-winner]); k.RecoveryPoint != "finished" || k.Locked || k.ResponseCode == nil || *k.ResponseCode != http.StatusConflict {
			t.Fatalf("want the other cancel's key finished with its 409 stored, got %+v", k)
		}
		s.assertRefundRequests(keys[winner], 1)
		s.assertRefundRequests(keys[1-winner], 0)
	})
}

// crashCancelAt starts an API that SIGKILLs itself at the fault point, sends it one cancel of
// ride rideID with key, and checks that the request's connection broke and the process died. It
// returns the port the dead API listened on, and when its client saw it die.
func (s *murphyStack) crashCancelAt(point, key, rideID string) (port int, killedAt time.Time) {
	s.t.Helper()
	return s.crashWith(point, func(baseURL string) rawAnswer { return s.postCancel(baseURL, key, rideID) })
}

// postCancel sends one POST /rides/{id}/cancel with key, without any retry.
func (s *murphyStack) postCancel(baseURL, key, rideID string) rawAnswer {
	return s.send(baseURL+"/rides/"+rideID+"/cancel", key, nil)
}

// claimedRideRow is the ride a cancel key claimed, as stored.
type claimedRideRow struct {
	ID       int64
	Status   string
	ChargeID *string
	RefundID *string
}

// claimedRide reads the ride that the cancel key keyID claimed, nil if none.
func (s *murphyStack) claimedRide(keyID int64) *claimedRideRow {
	s.t.Helper()
	var r claimedRideRow
	err := s.pool.QueryRow(context.Background(), `
		SELECT id, status, stripe_charge_id, stripe_refund_id FROM rides WHERE cancel_idempotency_key_id = $1`, keyID).
		Scan(&r.ID, &r.Status, &r.ChargeID, &r.RefundID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return &r
}

// stripeRefund is a refund as the Stripe stand-in's control API reports it.
type stripeRefund struct {
	ID             string            `json:"id"`
	Charge         string            `json:"charge"`
	Amount         int64             `json:"amount"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
}

// stripeRefunds asks the Stripe stand-in for the refunds of chargeID.
func (s *murphyStack) stripeRefunds(chargeID string) []stripeRefund {
	s.t.Helper()
	var res struct {
		Refunds []stripeRefund `json:"refunds"`
	}
	s.stripeControl(http.MethodGet, "refunds?charge="+chargeID, nil, &res)
	return res.Refunds
}

// assertCancelledOnce checks the outcome every cancel that finished must have: the key finished
// with a stored 200 naming the booked ride and its refund, and unlocked; the ride claimed by the
// key, cancelled, recording the refund; at Stripe, exactly one refund of the ride's charge, that
// refund, under the key's Stripe idempotency key, for the whole $20.00; one audit record of the
// cancel, and one refund receipt staged. With got, what a client got, it checks that the client
// was told of that refund. It returns the ride as stored.
func (s *murphyStack) assertCancelledOnce(key string, booked, got *client.Result) *claimedRideRow {
	s.t.Helper()
	k := s.key(key)
	if k.RecoveryPoint != "finished" || k.ResponseCode == nil || *k.ResponseCode != http.StatusOK || k.Locked {
		s.t.Fatalf("cancel key %s: want finished with a stored 200 and unlocked, got %s, response %v, locked %t, last error %v",
			key, k.RecoveryPoint, deref(k.ResponseCode), k.Locked, deref(k.LastError))
	}
	ride := s.claimedRide(k.ID)
	if ride == nil || strconv.FormatInt(ride.ID, 10) != booked.Ride.ID || ride.Status != "cancelled" || ride.RefundID == nil {
		s.t.Fatalf("cancel key %s: want ride %s claimed by it, cancelled and refunded; got %+v", key, booked.Ride.ID, ride)
	}
	var stored struct {
		Ride client.Ride `json:"ride"`
	}
	if err := json.Unmarshal(k.ResponseBody, &stored); err != nil || stored.Ride.ID != booked.Ride.ID ||
		stored.Ride.Status != "cancelled" || deref(stored.Ride.StripeRefundID) != *ride.RefundID {
		s.t.Fatalf("cancel key %s: the stored response %s is not ride %d cancelled with refund %s (%v)", key, k.ResponseBody, ride.ID, *ride.RefundID, err)
	}
	if got != nil && (got.Ride.ID != booked.Ride.ID || got.Ride.Status != "cancelled" || deref(got.Ride.StripeRefundID) != *ride.RefundID) {
		s.t.Fatalf("cancel key %s: the client got %+v, the ride records refund %s", key, got.Ride, *ride.RefundID)
	}

	refunds := s.stripeRefunds(*booked.Ride.StripeChargeID)
	if len(refunds) != 1 {
		s.t.Fatalf("ride %d: want exactly one refund of its charge at Stripe, got %+v", ride.ID, refunds)
	}
	if rf := refunds[0]; rf.ID != *ride.RefundID || rf.Amount != 20_00 || rf.IdempotencyKey != k.StripeKey || rf.Metadata["idempotency_key"] != key {
		s.t.Fatalf("ride %d: Stripe's refund %+v is not the ride's refund %s of $20.00 under %s", ride.ID, rf, *ride.RefundID, k.StripeKey)
	}
	if n := s.count(`SELECT count(*) FROM audit_records WHERE action = 'ride.cancelled' AND resource_id = $1`, ride.ID); n != 1 {
		s.t.Fatalf("ride %d: want one ride.cancelled audit record, got %d", ride.ID, n)
	}
	staged := s.count(`SELECT count(*) FROM staged_jobs WHERE job_name = 'send_refund_receipt' AND (job_args->>'ride_id')::bigint = $1`, ride.ID)
	if staged != 1 {
		s.t.Fatalf("ride %d: want exactly one staged refund receipt job, got %d", ride.ID, staged)
	}
	if abandoned := s.count(`SELECT count(*) FROM abandoned_requests`); abandoned != 0 {
		s.t.Fatalf("want no request left for a person to review, got %d", abandoned)
	}
	return ride
}

// assertRefundReplayed checks, when Stripe refunded before the kill, that the refund that
// finished the cancel was Stripe's replay of it under the key's Stripe key: two refund requests,
// one refund (which assertCancelledOnce counts); else that one refund request made it.
func (s *murphyStack) assertRefundReplayed(key string, refundedBeforeTheKill bool) {
	s.t.Helper()
	if refundedBeforeTheKill {
		s.assertRefundRequests(key, 2)
		if !hasLine(s.stripe.Output(), "path=/v1/refunds", "status=200", s.key(key).StripeKey, "replayed=true") {
			s.t.Fatalf("want Stripe to have replayed the refund for %s:\n%s", s.key(key).StripeKey, s.stripe.Output())
		}
		return
	}
	s.assertRefundRequests(key, 1)
}

// assertRefundRequests checks how many refund requests Stripe answered under the Stripe key of
// the cancel key, by the stand-in's log: how often the service asked, which says which path a
// scenario took. The log is read as the stand-in writes it, so a line can trail the answer it
// tells of by a moment.
func (s *murphyStack) assertRefundRequests(key string, want int) {
	s.t.Helper()
	stripeKey := s.key(key).StripeKey
	count := func() int {
		n := 0
		for line := range strings.Lines(s.stripe.Output()) {
			if strings.Contains(line, `msg="Fakestripe: answered request"`) && strings.Contains(line, "path=/v1/refunds") &&
				strings.Contains(line, "idempotency_key="+stripeKey+" ") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for count() < want && time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
	}
	if got := count(); got != want {
		s.t.Fatalf("want %d refund requests at Stripe under %s, got %d:\n%s", want, stripeKey, got, s.stripe.Output())
	}
}

func refundsWord(refunded bool) string {
	if refunded {
		return "one refund"
	}
	return "no refund"
}
