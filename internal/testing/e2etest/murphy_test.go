package e2etest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/devenv/cituscluster"
	"github.com/rocketrides/rocketrides/internal/devenv/pgcluster"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/migrations"
)

// The tests of this file are the failure scenarios of the article's "Murphy in action", each
// played on real processes (API, completer, enqueuer, worker, the Stripe stand-in) and a real
// Postgres, with the retrying client of package client as the rider's app. Each test has a
// database and processes of its own, so they run in parallel; most of their time is spent
// waiting out a short lock timeout, so `-parallel 8` runs them faster than the default.

// TestMurphyConnectionBreaksBeforeTheAPI: the connection breaks before the request reaches the
// API. The client retries with the same key; the API sees the request once, and books and
// charges it once.
func TestMurphyConnectionBreaksBeforeTheAPI(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	api := s.startAPI(0)
	const dropped = 3
	proxy := startMurphyProxy(t, fmt.Sprintf("127.0.0.1:%d", api.Port), dropped)

	res, err := s.client(proxy.URL()).CreateRide(t.Context(), murphyParams)
	if err != nil {
		t.Fatalf("want the client to retry its way to a ride, got %s", err)
	}
	// Replayed would mean that an earlier attempt reached the API after all.
	if res.Attempts != dropped+1 || res.Replayed {
		t.Fatalf("want %d attempts, the last one booking the ride afresh; got %d attempts, replayed %t", dropped+1, res.Attempts, res.Replayed)
	}
	if gotDropped, forwarded := proxy.Counts(); gotDropped != dropped || forwarded != 1 {
		t.Fatalf("want %d connections dropped and 1 forwarded, got %d and %d", dropped, gotDropped, forwarded)
	}

	s.assertReceiptStaged(s.assertBookedOnce(res.IdempotencyKey, res))
	if keys := s.count(`SELECT count(*) FROM idempotency_keys`); keys != 1 {
		t.Fatalf("want one idempotency key, got %d", keys)
	}
	s.assertChargeRequests(1)
	s.assertTotals(1)
}

// TestMurphySameKeyAtOnceOnTwoReplicas: two requests with one new key reach two API replicas at
// the same moment. One books the ride; the other is told the key is in use (409, retry after a
// second) or, if it came late, gets the first one's answer replayed. The loser's retry gets
// the winner's ride. Several keys, to give the race more than one chance to go wrong.
func TestMurphySameKeyAtOnceOnTwoReplicas(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	apis := []*murphyAPI{s.startAPI(0), s.startAPI(0)}
	// A slow Stripe keeps the winner inside the key's lock while the loser arrives.
	s.stripeLatency(300 * time.Millisecond)

	const keys = 3
	var conflicts, replays int
	for i := range keys {
		key := newKey(t)
		params := murphyParams
		params.TargetLat += float64(i) / 100

		var answers [2]rawAnswer
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, api := range apis {
			wg.Go(func() {
				<-start
				answers[j] = s.post(api.URL, key, params)
			})
		}
		close(start)
		wg.Wait()

		winner := slices.IndexFunc(answers[:], func(a rawAnswer) bool {
			return a.Err == nil && a.Status == http.StatusCreated && a.Header.Get("Idempotent-Replayed") == ""
		})
		if winner < 0 {
			t.Fatalf("key %d: want one request to book the ride, got %s and %s", i, answers[0], answers[1])
		}
		loser := answers[1-winner]
		switch {
		case loser.Err == nil && loser.Status == http.StatusConflict && loser.Code() == "idempotency_key_in_use" &&
			loser.Header.Get("Retry-After") == "1":
			conflicts++
		case loser.Err == nil && loser.Status == http.StatusCreated && loser.Header.Get("Idempotent-Replayed") == "true" &&
			loser.RideID() == answers[winner].RideID():
			replays++
		default:
			t.Fatalf("key %d: want the other request to get 409 idempotency_key_in_use or the replay, got %s", i, loser)
		}

		res, err := s.client(apis[1-winner].URL).CreateRideWithKey(t.Context(), key, params)
		if err != nil || !res.Replayed || res.Ride.ID != strconv.FormatInt(answers[winner].RideID(), 10) || res.Attempts != 1 {
			t.Fatalf("key %d: want the loser's retry to get ride %d replayed at once, got %+v, %v", i, answers[winner].RideID(), res, err)
		}
		s.assertReceiptStaged(s.assertBookedOnce(key, res))
	}
	t.Logf("the other request got 409 for %d keys and the replay for %d", conflicts, replays)

	// The losers never reached Stripe.
	s.assertChargeRequests(keys)
	s.assertTotals(keys)
}

// TestMurphyDatabaseGoesDown: the database goes down while a request holds its freshly created
// key. The request fails, and so does every retry while the database is down (the API answers
// 503 service_unavailable, and /readyz says it is not ready), but the API process stays up; once
// the database is back, its pool reconnects and the client's retries book the ride, once. The
// database is a private cluster, so that stopping it disturbs no other test; under TEST_CITUS it
// is a Citus cluster, whose coordinator goes down (TestCitusWorkersGoDown stops its workers).
func TestMurphyDatabaseGoesDown(t *testing.T) {
	t.Parallel()
	cluster, databaseURL := privateDatabase(t)
	playDatabaseGoesDown(t, databaseURL, true, cluster)
}

// playDatabaseGoesDown plays TestMurphyDatabaseGoesDown on the database at databaseURL, stopping
// servers while the request stalls and starting them again. readyzDown says whether /readyz,
// which asks the server the API connects to, is to answer 503 meanwhile.
func playDatabaseGoesDown(t *testing.T, databaseURL string, readyzDown bool, servers ...*pgcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	s := newMurphyStack(t, murphyOptions{DatabaseURL: databaseURL})
	// The stall holds the request right after its key is created, locked and at ride_created,
	// long enough to stop Postgres under it even on a loaded machine. (Each retry that resumes
	// from there stalls as well, once the database is back.)
	api := s.startAPI(0, "FAULTS=ride_created=stall:3s")
	key := newKey(t)
	c := s.client(api.URL)
	answers := recordAnswers(c)
	type outcome struct {
		res *client.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.CreateRideWithKey(t.Context(), key, murphyParams)
		done <- outcome{res, err}
	}()

	waitFor(t, "the API to stall the request", func() bool {
		if len(done) > 0 {
			t.Fatalf("the client finished before the request stalled: %+v", <-done)
		}
		return strings.Contains(api.Output(), "Faults: stalling")
	})
	if !s.keyExists(key) {
		t.Fatal("the request stalls at ride_created, but its key is not stored")
	}
	for _, server := range servers {
		if err := server.StopServer(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The database stays down until the client has been turned away twice: the stalled attempt
	// and at least one retry.
	waitFor(t, "the client to be turned away twice while the database is down", func() bool {
		if len(done) > 0 {
			t.Fatalf("the client finished while the database was down (or before it went down): %+v", <-done)
		}
		unavailable := 0
		for _, status := range answers.Statuses() {
			if status != http.StatusServiceUnavailable {
				t.Fatalf("want every answer 503 while the database is down, got %v", answers.Statuses())
			}
			unavailable++
		}
		return unavailable >= 2
	})
	want := http.StatusOK
	if readyzDown {
		want = http.StatusServiceUnavailable
	}
	if status := httpStatus(t, api.URL+"/readyz"); status != want {
		t.Fatalf("want /readyz %d while the database is down, got %d", want, status)
	}
	for _, server := range servers {
		if err := server.StartServer(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var out outcome
	select {
	case out = <-done:
	case <-time.After(murphyWait):
		t.Fatalf("the client did not finish within %s of the database coming back; it saw %v", murphyWait, answers.Statuses())
	}
	if out.err != nil || out.res.Replayed {
		t.Fatalf("want the ride booked once the database is back, got %+v, %v; the client saw %v", out.res, out.err, answers.Statuses())
	}
	t.Logf("the client saw %v", answers.Statuses())
	if api.Exited() {
		t.Fatalf("the API exited:\n%s", api.Output())
	}
	if status := httpStatus(t, api.URL+"/readyz"); status != http.StatusOK {
		t.Fatalf("want /readyz 200 once the database is back, got %d", status)
	}

	s.assertReceiptStaged(s.assertBookedOnce(key, out.res))
	// The held request went on to Stripe while the database was down, and Stripe charged; only
	// recording the charge failed. The retry sent the charge again with the same Stripe key,
	// and Stripe replayed it: two requests, one charge (assertTotals).
	s.assertChargeRequests(2)
	s.assertTotals(1)
}

// TestMurphyStripeIsDown: Stripe answers 500s, then times out, then answers again. Every
// attempt meanwhile gets 503 payment_processor_unavailable with Retry-After, and leaves the key
// unlocked at ride_created with nothing charged; the client waits as told and its retry
// charges once.
func TestMurphyStripeIsDown(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	api := s.startAPI(0)
	key := newKey(t)

	// Attempts sent by hand, one after another, so that the outage does not cost four
	// Retry-After waits.
	faults := []string{"error_500", "error_500", "timeout", "timeout"}
	for _, kind := range faults {
		s.stripeFaults(kind, 1)
	}
	for i, kind := range faults {
		answer := s.post(api.URL, key, murphyParams)
		if answer.Err != nil || answer.Status != http.StatusServiceUnavailable ||
			answer.Code() != "payment_processor_unavailable" || answer.Header.Get("Retry-After") != "5" {
			t.Fatalf("attempt %d (Stripe %s): want 503 payment_processor_unavailable with Retry-After 5, got %s", i+1, kind, answer)
		}
		k := s.key(key)
		if k.RecoveryPoint != "ride_created" || k.Locked || !k.ForeignMutationAttempted || k.RideID == nil || k.RideStripeCharge != nil {
			t.Fatalf("attempt %d: want the key unlocked at ride_created, its ride not charged; got %+v", i+1, k)
		}
	}
	if charges := s.stripeCharges(); charges.ChargeRequests != len(faults) || len(charges.Succeeded("")) != 0 {
		t.Fatalf("want %d failed charge requests and no charge at Stripe, got %+v", len(faults), charges)
	}

	// One more failure for the client, which must wait out the Retry-After before it succeeds.
	s.stripeFaults("error_500", 1)
	c := s.client(api.URL)
	answers := recordAnswers(c)
	start := time.Now()
	res, err := c.CreateRideWithKey(t.Context(), key, murphyParams)
	if err != nil {
		t.Fatalf("want the ride booked once Stripe recovers, got %s", err)
	}
	if elapsed := time.Since(start); res.Attempts != 2 || !slices.Equal(answers.Statuses(), []int{503, 201}) || res.Replayed || elapsed < 5*time.Second {
		t.Fatalf("want a 503, a wait of the 5 s Retry-After, then a 201; got %v after %s (%+v)", answers.Statuses(), elapsed, res)
	}

	s.assertReceiptStaged(s.assertBookedOnce(key, res))
	// The outage's, the client's failed first attempt, and the charge.
	s.assertChargeRequests(len(faults) + 2)
	s.assertTotals(1)
}

// TestMurphyAPIKilledAfterStripeCharged: the API process is SIGKILLed after Stripe charged and
// before it recorded the charge, the worst moment to die. Its client's connection breaks.
// Another replica gets the retry, waits out what is left of the dead request's lease (seconds),
// sends the charge again with the key's Stripe idempotency key, and Stripe replays the charge
// it made: one charge, booked within murphyTakeoverWithin of the kill.
func TestMurphyAPIKilledAfterStripeCharged(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	other := s.startAPI(0)
	key := newKey(t)
	_, killedAt := s.crashAt("charge_answered", key)

	k := s.key(key)
	if k.RecoveryPoint != "ride_created" || !k.Locked || k.RideStripeCharge != nil {
		t.Fatalf("want the dead request's key locked at ride_created, its ride not charged; got %+v", k)
	}
	if charges := s.stripeCharges(); charges.ChargeRequests != 1 || len(charges.Succeeded(k.StripeKey)) != 1 {
		t.Fatalf("want Stripe to have charged once already, got %+v", charges)
	}

	c := s.client(other.URL)
	answers := recordAnswers(c)
	res, err := c.CreateRideWithKey(t.Context(), key, murphyParams)
	if err != nil || res.Replayed {
		t.Fatalf("want the retry to book the ride, got %+v, %v", res, err)
	}
	requireTakeoverInTime(t, killedAt)
	t.Logf("the retry saw %v", answers.Statuses())

	s.assertReceiptStaged(s.assertBookedOnce(key, res))
	// The dead request's, which charged, and the retry's, which Stripe answered with a replay.
	s.assertChargeRequests(2)
	if !hasLine(s.stripe.Output(), k.StripeKey, "replayed=true") {
		t.Fatalf("want Stripe to have replayed the charge for %s:\n%s", k.StripeKey, s.stripe.Output())
	}
	s.assertTotals(1)
}

// TestMurphyAPIKilledAfterRecoveryPoint: the API process is SIGKILLed right after each recovery
// point commits. The dead request leaves its key locked; once the lock times out, either the
// client's retry to a restarted API or, when the client never comes back, the completer takes
// the key over and finishes it from where it stopped: one ride, one charge, a receipt staged.
func TestMurphyAPIKilledAfterRecoveryPoint(t *testing.T) {
	t.Parallel()
	// The first atomic phase commits the key at ride_created with its ride; the second commits
	// the charge together with the response (finished), which TestMurphyAPIKilledAfterFinished
	// covers. So ride_created is the one point at which a dead request leaves a key unfinished.
	for _, tt := range []struct{ name, point string }{
		{"AfterRideCreated", "ride_created"},
	} {
		point := tt.point
		// What the dead request left: a ride, not charged yet.
		hasRide, charged := true, false

		// crash kills an API at point with a request of a new key in flight, with another
		// replica already running, as in production.
		crash := func(t *testing.T) (s *murphyStack, key string, port int, other *murphyAPI, killedAt time.Time) {
			s = newMurphyStack(t, murphyOptions{})
			other = s.startAPI(0)
			key = newKey(t)
			port, killedAt = s.crashAt(point, key)
			k := s.key(key)
			if k.RecoveryPoint != point || !k.Locked || (k.RideID != nil) != hasRide || (k.RideStripeCharge != nil) != charged {
				t.Fatalf("want the dead request's key locked at %s (ride %t, charged %t), got %+v", point, hasRide, charged, k)
			}
			return s, key, port, other, killedAt
		}
		// Whoever finishes the key charges only if the dead request had not: one request in all.
		assertFinished := func(s *murphyStack, key string, got *client.Result) keyRow {
			k := s.assertBookedOnce(key, got)
			s.assertReceiptStaged(k)
			s.assertChargeRequests(1)
			s.assertTotals(1)
			return k
		}

		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			t.Run("ClientRetryThroughAnotherReplicaFinishesIt", func(t *testing.T) {
				t.Parallel()
				s, key, _, other, killedAt := crash(t)
				// The dead request's lease turns the retries away until it runs out. An answer
				// that came back before then was decided before then, whatever the machine's
				// speed, so it must be that 409; a later one (a machine slow enough to spend
				// the whole lease between the crash and the retry) is not held to it.
				lockedUntil := s.key(key).LockedUntil
				c := s.client(other.URL)
				answers := recordAnswers(c)
				res, err := c.CreateRideWithKey(t.Context(), key, murphyParams)
				if err != nil || res.Replayed {
					t.Fatalf("want the retry to book the ride, got %+v, %v", res, err)
				}
				requireTakeoverInTime(t, killedAt)
				switch status, at := answers.First(t); {
				case at.Before(lockedUntil) && status != http.StatusConflict:
					t.Fatalf("want the first retry, answered %s before the lease ran out, to find the key in use (409); the client saw %v",
						lockedUntil.Sub(at).Round(time.Millisecond), answers.Statuses())
				case !at.Before(lockedUntil):
					t.Logf("the first retry was answered %s after the lease ran out; its 409 is not required", at.Sub(lockedUntil))
				}
				assertFinished(s, key, res)
			})

			t.Run("CompleterFinishesIt", func(t *testing.T) {
				t.Parallel()
				s, key, port, _, _ := crash(t)
				s.waitLockExpired(key)
				if succeeded, failed := s.runCompleter(); succeeded != 1 || failed != 0 {
					t.Fatalf("want the completer to finish the key, got %d succeeded, %d failed", succeeded, failed)
				}
				k := assertFinished(s, key, nil)

				// The app, back at last, learns the outcome.
				answer := s.post(s.startAPI(port).URL, key, murphyParams)
				if answer.Err != nil || answer.Status != http.StatusCreated || answer.Header.Get("Idempotent-Replayed") != "true" ||
					answer.RideID() != *k.RideID {
					t.Fatalf("want the completer's 201 for ride %d replayed to the client, got %s", *k.RideID, answer)
				}
			})
		})
	}
}

// TestMurphyBadDeploy: a bad deploy answers 500 to every ride request midway, after the ride is
// created (SIMULATE_ERRORS and raise_error). Clients give up with an unknown outcome. After the
// fix is deployed, the clients that come back retry their keys and get their rides; the keys
// of those that never come back are pushed through by the completer. Every key ends with one
// ride and one charge.
func TestMurphyBadDeploy(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	bad := s.startAPI(0, "SIMULATE_ERRORS=true")

	const riders = 6
	keys := make([]string, riders)
	params := make([]client.RideParams, riders)
	errs := make([]error, riders)
	answers := make([]*answerRecorder, riders)
	var wg sync.WaitGroup
	for i := range riders {
		keys[i] = newKey(t)
		params[i] = murphyParams
		params[i].TargetLat += float64(i) / 100
		broken := params[i]
		broken.RaiseError = true
		c := s.client(bad.URL)
		// An app that gives up soon, but not before it retried a 409 after its one-second
		// Retry-After: on a busy machine, requests at once can run out of serialization
		// retries, and a 409 is their answer.
		c.MaxElapsed = 3 * time.Second
		answers[i] = recordAnswers(c)
		wg.Go(func() { _, errs[i] = c.CreateRideWithKey(t.Context(), keys[i], broken) })
	}
	wg.Wait()
	for i, err := range errs {
		var unknown *client.UnknownOutcomeError
		if !errors.As(err, &unknown) || unknown.IdempotencyKey != keys[i] || !slices.Contains(answers[i].Statuses(), http.StatusInternalServerError) {
			t.Fatalf("rider %d: want an unknown outcome after 500 answers, got %v after %v", i, err, answers[i].Statuses())
		}
		k := s.key(keys[i])
		if k.RecoveryPoint != "ride_created" || k.Locked || k.RideID == nil || k.RideStripeCharge != nil {
			t.Fatalf("rider %d: want the key unlocked at ride_created, its ride not charged; got %+v", i, k)
		}
	}
	s.assertChargeRequests(0)

	// The fix: the bad API is stopped, and a good one takes its place.
	bad.Terminate(t, 15*time.Second)
	fixed := s.startAPI(bad.Port)

	// Half the riders come back and retry with their keys.
	results := make([]*client.Result, riders)
	for i := range riders / 2 {
		res, err := s.client(fixed.URL).CreateRideWithKey(t.Context(), keys[i], params[i])
		if err != nil || res.Replayed {
			t.Fatalf("rider %d: want the retry to book the ride, got %+v, %v", i, res, err)
		}
		results[i] = res
	}
	// The others never do; the completer finishes their requests.
	if succeeded, failed := s.runCompleter(); succeeded != riders-riders/2 || failed != 0 {
		t.Fatalf("want the completer to finish %d keys, got %d succeeded, %d failed", riders-riders/2, succeeded, failed)
	}

	for i, key := range keys {
		s.assertReceiptStaged(s.assertBookedOnce(key, results[i]))
	}
	s.assertChargeRequests(riders)
	s.assertTotals(riders)
}

// TestMurphyFrozenProcessIsFencedOut: an API process freezes right after Stripe charged (a VM
// paused, a process stopped: here SIGSTOP), so it stops renewing its lease. Once the lease runs
// out, the client's retry on another API takes the key over and finishes it, Stripe replaying
// the charge. When the frozen process thaws (SIGCONT), the lock generation tells its request
// that it lost the key: it commits nothing and answers 409. One charge, one ride, one receipt
// mailed by the real enqueuer and worker.
func TestMurphyFrozenProcessIsFencedOut(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{Mail: true})
	// The stall holds the request where Stripe has charged until the process is stopped.
	freezing := s.startAPI(0, "FAULTS=charge_answered=stall:3s")
	other := s.startAPI(0)
	s.start("enqueuer")
	s.start("worker")
	key := newKey(t)

	stalled := make(chan rawAnswer, 1)
	go func() { stalled <- s.post(freezing.URL, key, murphyParams) }()
	waitFor(t, "the API to hold the request after Stripe charged", func() bool {
		if len(stalled) > 0 {
			t.Fatalf("the request answered instead of stalling: %s", <-stalled)
		}
		return strings.Contains(freezing.Output(), "Faults: stalling")
	})
	if err := freezing.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := freezing.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()
	s.waitLockExpired(key)

	res, err := s.client(other.URL).CreateRideWithKey(t.Context(), key, murphyParams)
	if err != nil || res.Replayed {
		t.Fatalf("want the retry to take the key over and book the ride, got %+v, %v", res, err)
	}
	thaw()
	var answer rawAnswer
	select {
	case answer = <-stalled:
	case <-time.After(murphyWait):
		t.Fatalf("the thawed request did not answer within %s", murphyWait)
	}
	if answer.Err != nil || answer.Status != http.StatusConflict || answer.Code() != "idempotency_key_in_use" {
		t.Fatalf("want the thawed request to answer 409 idempotency_key_in_use, got %s", answer)
	}

	s.assertBookedOnce(key, res)
	// The frozen request's, which charged, and the takeover's, which Stripe replayed.
	s.assertChargeRequests(2)
	s.assertTotals(1)

	s.waitFor("the receipt to be mailed and recorded", func() bool { return s.key(key).RideReceiptSentAt != nil })
	if jobs := s.count(`SELECT count(*) FROM river_job WHERE kind = 'send_ride_receipt'`); jobs != 1 {
		t.Fatalf("want one receipt job, got %d", jobs)
	}
	if staged := s.count(`SELECT count(*) FROM staged_jobs`); staged != 0 {
		t.Fatalf("want no staged job left, got %d", staged)
	}
	if messages := s.mail.Messages(); len(messages) != 1 || len(messages[0].To) != 1 || messages[0].To[0] != s.email {
		t.Fatalf("want one receipt mailed to %s, got %+v", s.email, messages)
	}
}

// TestMurphyAPIKilledAfterFinished: the API dies after the last atomic phase committed the
// charge and the response, before the client got the answer. The client's retry, through a
// restarted API, gets the stored 201 replayed at once: nothing to resume, one charge.
func TestMurphyAPIKilledAfterFinished(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	key := newKey(t)
	port, _ := s.crashAt("finished", key)
	if k := s.key(key); k.RecoveryPoint != "finished" || k.Locked || k.RideStripeCharge == nil {
		t.Fatalf("want the dead request's key finished, unlocked and charged, got %+v", k)
	}
	res, err := s.client(s.startAPI(port).URL).CreateRideWithKey(t.Context(), key, murphyParams)
	if err != nil || !res.Replayed || res.Attempts != 1 {
		t.Fatalf("want the retry to get the stored 201 replayed at once, got %+v, %v", res, err)
	}
	k := s.assertBookedOnce(key, res)
	s.assertReceiptStaged(k)
	s.assertChargeRequests(1)
	s.assertTotals(1)
}

// privateDatabase starts a cluster for this test alone, plain or (under TEST_CITUS) Citus, and
// returns the server the test may stop (Citus's coordinator) and its migrated database's URL.
func privateDatabase(t *testing.T) (*pgcluster.Cluster, string) {
	t.Helper()
	ctx := context.Background()
	if dbtest.OnCitus() {
		c, err := cituscluster.Start(ctx, cituscluster.Config{})
		if err != nil {
			t.Fatalf("error starting a private Citus cluster: %s", err)
		}
		t.Cleanup(func() {
			if err := c.Stop(context.Background()); err != nil {
				t.Error(err)
			}
		})
		url := c.Coordinator.URL("postgres")
		if err := migrations.Up(ctx, url); err != nil {
			t.Fatal(err)
		}
		return c.Coordinator, url
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{})
	if err != nil {
		t.Fatalf("error starting a private Postgres: %s", err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := cluster.CreateDatabase(ctx, "rocketrides"); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, cluster.URL("rocketrides")); err != nil {
		t.Fatal(err)
	}
	return cluster, cluster.URL("rocketrides")
}

// crashAt starts an API that SIGKILLs itself at the fault point, sends it one request with key,
// and checks that the request's connection broke and the process died. It returns the port the
// dead API listened on, for a restarted one, and when its client saw it die.
func (s *murphyStack) crashAt(point, key string) (port int, killedAt time.Time) {
	s.t.Helper()
	return s.crashWith(point, func(baseURL string) rawAnswer { return s.post(baseURL, key, murphyParams) })
}

// crashWith starts an API that SIGKILLs itself at the fault point, sends it one request with
// send, and checks that the request's connection broke and the process died. It returns the port
// the dead API listened on, and when its client saw it die.
func (s *murphyStack) crashWith(point string, send func(baseURL string) rawAnswer) (port int, killedAt time.Time) {
	s.t.Helper()
	crashing := s.startAPI(0, "FAULTS="+point+"=crash")
	if answer := send(crashing.URL); answer.Err == nil {
		s.t.Fatalf("want the connection to break when the API dies at %s, got %s", point, answer)
	}
	killedAt = time.Now()
	if code := crashing.Wait(s.t, 10*time.Second); code != -1 || !strings.Contains(crashing.Output(), "Faults: crashing") {
		s.t.Fatalf("want the API killed at %s, it exited %d:\n%s", point, code, crashing.Output())
	}
	return crashing.Port, killedAt
}

// requireTakeoverInTime checks that a retry through another replica finished the request (booked
// or cancelled the ride) within murphyTakeoverWithin of the kill: the dead request's lease ran
// out, and was not waited out for the article's 90 s.
func requireTakeoverInTime(t *testing.T, killedAt time.Time) {
	t.Helper()
	if took := time.Since(killedAt); took > murphyTakeoverWithin {
		t.Fatalf("want the request finished within %s of the kill, took %s", murphyTakeoverWithin, took)
	} else {
		t.Logf("finished %s after the kill", took.Round(time.Millisecond))
	}
}

// httpStatus GETs url and returns the status, 0 on a network error.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hasLine reports whether some line of output contains every one of substrs.
func hasLine(output string, substrs ...string) bool {
	for line := range strings.Lines(output) {
		if !slices.ContainsFunc(substrs, func(sub string) bool { return !strings.Contains(line, sub) }) {
			return true
		}
	}
	return false
}
