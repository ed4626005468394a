package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/testing/invariants"
)

// The clients' retry policy. A call that cannot finish in clientMaxElapsed gives up and says
// the outcome is unknown, which the soak then settles the honest way: by asking again with the
// same key. attemptTimeout is far above a healthy request (milliseconds) and a Stripe timeout
// fault (1.5 s), and below the API's 45 s budget.
const (
	clientMaxElapsed  = 20 * time.Second
	clientBaseBackoff = 100 * time.Millisecond
	clientMaxBackoff  = 2 * time.Second
	attemptTimeout    = 10 * time.Second
	redriveMaxElapsed = 60 * time.Second
)

// The mix of calls, out of 100: most are plain; some are double taps (the same key sent twice
// at once, as a user tapping twice does), some are abandoned mid-request (the app closed), some
// come from the rider whose card is declined. Of the rides booked, some are cancelled, each
// under a key of its own; and of those, some twice at once under two keys (two devices, or an
// app that lost its key), which must refund once: one cancel is told 200, the other 409
// ride_already_cancelled.
const (
	percentDoubleTap   = 5
	percentAbandon     = 5
	percentDeclined    = 7
	percentCancel      = 10
	percentCancelTwice = 25
	maxThinkTime       = 20 * time.Millisecond
)

// callMode says how a call was made, for the summary.
type callMode string

const (
	modePlain       callMode = "plain"
	modeDoubleTap   callMode = "double_tap"
	modeAbandoned   callMode = "abandoned"
	modeCancel      callMode = "cancel"
	modeCancelTwice callMode = "cancel_twice"
	modeRedrive     callMode = "redrive"
)

// record is one client call and how it ended.
type record struct {
	mode      callMode
	params    client.RideParams
	rideID    string // the ride a cancel cancels; empty for a booking
	token     string
	outcome   invariants.ClientOutcome
	attempts  int
	replayed  bool
	clientErr error // an error that is none of the client's three answers: a bug
}

// isCancel reports whether the call was a cancel rather than a booking.
func (rec *record) isCancel() bool { return rec.rideID != "" }

// load runs the clients and keeps what every call was told.
type load struct {
	cfg      *config
	riders   []rider
	declined rider
	hosts    []string
	base     http.RoundTripper

	wg       sync.WaitGroup
	inFlight atomic.Int64

	// answers counts what the API answered each attempt, by status.
	answers *answerTally

	mu      sync.Mutex
	records []record
}

func newLoad(cfg *config, st *stack) *load {
	return &load{
		cfg:      cfg,
		riders:   st.riders,
		declined: st.declined,
		hosts:    st.apiHosts(),
		base:     &http.Transport{MaxIdleConnsPerHost: cfg.clients * 2, IdleConnTimeout: 30 * time.Second},
		answers:  &answerTally{byStatus: map[int]int{}},
	}
}

// answerTally counts the API's answers to every attempt, and notes the first 201 to an attempt
// sent after a moment that a failover marks.
type answerTally struct {
	mu        sync.Mutex
	byStatus  map[int]int
	watchFrom time.Time
	created   time.Time // the first 201 to an attempt sent after watchFrom; zero until then
}

func (a *answerTally) add(sent time.Time, status int) {
	if a == nil {
		return // nobody counts
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byStatus[status]++
	if status == http.StatusCreated && !a.watchFrom.IsZero() && sent.After(a.watchFrom) && a.created.IsZero() {
		a.created = time.Now()
	}
}

// statuses returns the counts by status.
func (a *answerTally) statuses() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.byStatus)
}

// watchFrom starts watching for the first ride booked by an attempt sent after from.
func (l *load) watchFrom(from time.Time) {
	l.answers.mu.Lock()
	defer l.answers.mu.Unlock()
	l.answers.watchFrom, l.answers.created = from, time.Time{}
}

// firstCreated waits up to wait for the ride that watchFrom waits for, and returns when it was
// booked.
func (l *load) firstCreated(ctx context.Context, wait time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		l.answers.mu.Lock()
		created := l.answers.created
		l.answers.mu.Unlock()
		if !created.IsZero() {
			return created, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, false
}

// start runs cfg.clients clients until stop is closed. Calls in progress then run to their end;
// wait waits for them. ctx ends them at once (an interrupt).
func (l *load) start(ctx context.Context, stop <-chan struct{}) {
	for i := range l.cfg.clients {
		l.wg.Go(func() { l.client(ctx, stop, rand.New(rand.NewPCG(l.cfg.seed, uint64(i+1)))) })
	}
}

func (l *load) wait() { l.wg.Wait() }

// client books rides one after another, each under a fresh key, and cancels some of them.
func (l *load) client(ctx context.Context, stop <-chan struct{}, rng *rand.Rand) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		r := l.riders[rng.IntN(len(l.riders))]
		if rng.IntN(100) < percentDeclined {
			r = l.declined
		}
		params := client.RideParams{
			OriginLat: rng.Float64()*180 - 90, OriginLon: rng.Float64()*360 - 180,
			TargetLat: rng.Float64()*180 - 90, TargetLon: rng.Float64()*360 - 180,
		}
		key, err := client.NewIdempotencyKey()
		if err != nil {
			l.add(record{mode: modePlain, clientErr: err})
			continue
		}
		booking := record{params: params, token: r.Token, outcome: invariants.ClientOutcome{UserID: r.ID, IdempotencyKey: key}}
		var booked record
		switch n := rng.IntN(100); {
		case n < percentDoubleTap:
			booking.mode = modeDoubleTap
			var taps sync.WaitGroup
			var told [2]record
			for i, start := range []uint64{rng.Uint64(), rng.Uint64()} {
				taps.Go(func() { told[i] = l.call(ctx, booking, start) })
			}
			taps.Wait()
			booked = told[0]
			if told[1].outcome.Kind == invariants.OutcomeCreated {
				booked = told[1]
			}
		case n < percentDoubleTap+percentAbandon:
			booking.mode = modeAbandoned
			giveUpAfter := time.Duration(20+rng.IntN(400)) * time.Millisecond
			abandonCtx, cancel := context.WithTimeout(ctx, giveUpAfter)
			l.call(abandonCtx, booking, rng.Uint64())
			cancel()
		default:
			booking.mode = modePlain
			booked = l.call(ctx, booking, rng.Uint64())
		}
		if booked.outcome.Kind == invariants.OutcomeCreated && rng.IntN(100) < percentCancel {
			l.cancel(ctx, rng, r, strconv.FormatInt(booked.outcome.RideID, 10))
		}
		time.Sleep(time.Duration(rng.Int64N(int64(maxThinkTime))))
	}
}

// cancel cancels ride rideID of rider r under a fresh key, or, now and then, twice at once under
// two.
func (l *load) cancel(ctx context.Context, rng *rand.Rand, r rider, rideID string) {
	calls := 1
	mode := modeCancel
	if rng.IntN(100) < percentCancelTwice {
		calls, mode = 2, modeCancelTwice
	}
	var wg sync.WaitGroup
	for range calls {
		key, err := client.NewIdempotencyKey()
		if err != nil {
			l.add(record{mode: mode, clientErr: err})
			break
		}
		rec := record{mode: mode, rideID: rideID, token: r.Token, outcome: invariants.ClientOutcome{UserID: r.ID, IdempotencyKey: key}}
		start := rng.Uint64()
		wg.Go(func() { l.call(ctx, rec, start) })
	}
	wg.Wait()
}

// call makes one call, rec's booking or cancel under rec's key, and records how it ended. start
// picks the replica of the first attempt.
func (l *load) call(ctx context.Context, rec record, start uint64) record {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	maxElapsed := clientMaxElapsed
	if rec.mode == modeRedrive {
		maxElapsed = redriveMaxElapsed
	}
	c := &client.Client{
		BaseURL: "http://" + l.hosts[0], // the transport picks the replica of each attempt
		Token:   rec.token,
		HTTPClient: &http.Client{
			Timeout:   attemptTimeout,
			Transport: &roundRobin{hosts: l.hosts, next: start, base: l.base, answers: l.answers},
		},
		MaxElapsed:  maxElapsed,
		BaseBackoff: clientBaseBackoff,
		MaxBackoff:  clientMaxBackoff,
	}
	key := rec.outcome.IdempotencyKey
	var (
		res *client.Result
		err error
	)
	if rec.isCancel() {
		res, err = c.CancelRideWithKey(ctx, key, rec.rideID)
	} else {
		res, err = c.CreateRideWithKey(ctx, key, rec.params)
	}

	var apiErr *client.APIError
	var unknown *client.UnknownOutcomeError
	switch {
	case err == nil:
		rec.outcome.Kind = invariants.OutcomeCreated
		if rec.isCancel() {
			rec.outcome.Kind = invariants.OutcomeCancelled
		}
		// The API's ride ids are strings; the checker holds them to the rows' numbers. One that
		// does not parse stays 0, which no ride has, and is reported as a contradiction.
		rec.outcome.RideID, _ = strconv.ParseInt(res.Ride.ID, 10, 64)
		if res.Ride.StripeChargeID != nil {
			rec.outcome.ChargeID = *res.Ride.StripeChargeID
		}
		if res.Ride.StripeRefundID != nil {
			rec.outcome.RefundID = *res.Ride.StripeRefundID
		}
		rec.attempts, rec.replayed = res.Attempts, res.Replayed
	case errors.As(err, &apiErr):
		rec.outcome.Kind = invariants.OutcomeRefused
		rec.outcome.StatusCode, rec.outcome.Code = apiErr.StatusCode, apiErr.Code
		rec.attempts, rec.replayed = apiErr.Attempts, apiErr.Replayed
	case errors.As(err, &unknown):
		rec.outcome.Kind = invariants.OutcomeUnknown
		rec.attempts = unknown.Attempts
	default:
		rec.outcome.Kind = invariants.OutcomeUnknown
		rec.clientErr = err
	}
	l.add(rec)
	return rec
}

func (l *load) add(rec record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
}

// snapshot returns a copy of the records so far.
func (l *load) snapshot() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]record(nil), l.records...)
}

// bookedRide is a ride a client was told was booked, for the dashboard's refunds and the banks'
// disputes to pick from.
type bookedRide struct {
	id       int64
	chargeID string
}

// bookedRides returns the rides clients were told were booked and no client asked to cancel,
// in the order they were booked.
func (l *load) bookedRides() []bookedRide {
	records := l.snapshot()
	cancelled := map[string]bool{}
	for _, rec := range records {
		if rec.isCancel() {
			cancelled[rec.rideID] = true
		}
	}
	seen := map[int64]bool{}
	var rides []bookedRide
	for _, rec := range records {
		o := rec.outcome
		if o.Kind == invariants.OutcomeCreated && !seen[o.RideID] && !cancelled[strconv.FormatInt(o.RideID, 10)] {
			seen[o.RideID] = true
			rides = append(rides, bookedRide{id: o.RideID, chargeID: o.ChargeID})
		}
	}
	return rides
}

// redrive asks again, with the same key and parameters, about every key whose every call so
// far ended unknown: what an honest client does when it comes back, to a booking or a cancel. It
// returns how many keys it asked about.
func (l *load) redrive(ctx context.Context) int {
	records := l.snapshot()
	settled := map[string]bool{}
	for _, rec := range records {
		if rec.outcome.Kind != invariants.OutcomeUnknown {
			settled[rec.outcome.IdempotencyKey] = true
		}
	}
	var pending []record
	for _, rec := range records {
		if key := rec.outcome.IdempotencyKey; !settled[key] && rec.clientErr == nil {
			settled[key] = true
			pending = append(pending, rec)
		}
	}

	work := make(chan record)
	var wg sync.WaitGroup
	for i := range l.cfg.clients {
		wg.Go(func() {
			for rec := range work {
				again := record{mode: modeRedrive, params: rec.params, rideID: rec.rideID, token: rec.token,
					outcome: invariants.ClientOutcome{UserID: rec.outcome.UserID, IdempotencyKey: rec.outcome.IdempotencyKey}}
				l.call(ctx, again, uint64(i))
			}
		})
	}
	for _, rec := range pending {
		work <- rec
	}
	close(work)
	wg.Wait()
	return len(pending)
}

// roundRobin sends each attempt of one call to the next API replica, as a client-side load
// balancer does: an attempt that found its replica dead is retried on another. One roundRobin
// serves one call, so that its attempts alternate whatever other calls do.
type roundRobin struct {
	hosts   []string
	next    uint64
	base    http.RoundTripper
	answers *answerTally
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	host := rr.hosts[atomic.AddUint64(&rr.next, 1)%uint64(len(rr.hosts))]
	out := req.Clone(req.Context()) // a RoundTripper must not change the request it was given
	out.URL.Host, out.Host = host, host
	sent := time.Now()
	resp, err := rr.base.RoundTrip(out)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", host, err)
	}
	rr.answers.add(sent, resp.StatusCode)
	return resp, nil
}
