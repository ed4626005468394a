package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/invariants"
)

// progressEvery is how often the soak prints a progress line.
const progressEvery = 5 * time.Second

// soak is one run: the load, the faults fired at it, and what settling found.
type soak struct {
	cfg      *config
	st       *stack
	events   *eventLog
	progress func(string, ...any)
	faults   []fault
	load     *load
	started  time.Time

	// interrupted ends when the soak is interrupted (SIGINT, SIGTERM): the faults that otherwise
	// run to their end whatever the soak's end says (a failover) give up then, so that the
	// stack is stopped and the soak reports.
	interrupted context.Context

	faultsWG  sync.WaitGroup
	dbFaults  sync.WaitGroup // database faults fired and not yet over
	dbMu      sync.Mutex     // one database restart or failover at a time
	latencyMu sync.Mutex     // one slow spell at a time
	fatal     chan error     // the stack broke beyond repair (the database did not come back)

	mu               sync.Mutex
	fired            map[faultKind]int // faults the harness performed; for Stripe faults, queued
	faultErrors      []string          // faults that could not be performed
	unavailable      []time.Duration   // each failover's: from the primary's loss to the first 201 after it
	dashboardRefunds []string          // the refunds the soak made from Stripe's dashboard
	refusedActions   int               // dashboard refunds and disputes Stripe refused: the charge was refunded or disputed already

	// What settling found.
	unfinishedAtSoakEnd    int // keys not finished when the faults stopped
	unfinishedAfterSettle  int // keys neither the clients nor the completer finished
	redriven               int
	jobsRetriedEarly       int
	jobsRescued            int     // receipt jobs left running by a worker killed or cut off, taken up again by River
	receiptDelayMaxSeconds float64 // the longest from a receipt's staging to its job's completion
	stripeChargeRequests   int
	refundFaultsPending    map[string]int // refund faults queued and never struck, by the stand-in's name; nil: unknown
	failures               []string       // broken promises that are no invariant of the data: unclean stops, client bugs
}

func newSoak(cfg *config, st *stack, events *eventLog, progress func(string, ...any)) *soak {
	faults := schedule(cfg.seed, cfg.duration, cfg.dbRestarts)
	if cfg.ha {
		// Every database fault is a failover, the machine lost and frozen in turn.
		n := 0
		for i := range faults {
			if faults[i].kind == faultDatabaseRestart {
				faults[i].kind = []faultKind{faultFailoverKill, faultFailoverFreeze}[n%2]
				n++
			}
		}
	}
	return &soak{
		cfg:      cfg,
		st:       st,
		events:   events,
		progress: progress,
		faults:   faults,
		load:     newLoad(cfg, st),
		fatal:    make(chan error, 1),
		fired:    map[faultKind]int{},
	}
}

// run books rides for cfg.duration while the faults fire, then stops both: no new ride is
// started and no new fault fires, but calls in progress go on (settle waits for them).
func (s *soak) run(ctx context.Context) error {
	s.interrupted = ctx
	for _, f := range s.faults {
		s.events.note("scheduled fault " + f.String())
	}
	s.started = time.Now()
	stopLoad := make(chan struct{})
	s.load.start(ctx, stopLoad)
	injectCtx, stopInjecting := context.WithCancel(ctx)
	s.faultsWG.Go(func() { s.injectAll(injectCtx) })

	ticker := time.NewTicker(progressEvery)
	defer ticker.Stop()
	end := time.After(s.cfg.duration)
	var err error
loop:
	for {
		select {
		case <-end:
			// The database's faults run to their end under load: a failover waits for a ride
			// booked after it, and one still queued behind another must not be skipped. An
			// interrupt does not wait for them.
			dbFaultsOver := make(chan struct{})
			go func() {
				s.dbFaults.Wait()
				close(dbFaultsOver)
			}()
			select {
			case <-dbFaultsOver:
			case <-ctx.Done():
				err = ctx.Err()
			}
			break loop
		case <-ticker.C:
			s.progress("%s", s.progressLine())
		case err = <-s.fatal:
			break loop
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		}
	}
	close(stopLoad)
	stopInjecting()
	s.faultsWG.Wait()
	// For the summary of a soak cut short; check notes them again at the end.
	_ = s.notePendingRefundFaults(context.WithoutCancel(ctx)) // unknown if it fails: the summary says so
	if err == nil {
		select {
		case err = <-s.fatal: // a database restart that failed as the soak ended
		default:
		}
	}
	s.progress("soak over: %s", s.progressLine())
	return err
}

// injectAll fires each scheduled fault at its time, each in a goroutine of its own, so that
// faults overlap as they do in life: an API dies while the database is down.
func (s *soak) injectAll(ctx context.Context) {
	for _, f := range s.faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.started.Add(f.at))):
		}
		if f.kind == faultDatabaseRestart || f.kind == faultFailoverKill || f.kind == faultFailoverFreeze {
			s.dbFaults.Add(1)
			s.faultsWG.Go(func() {
				defer s.dbFaults.Done()
				s.inject(ctx, f)
			})
			continue
		}
		s.faultsWG.Go(func() { s.inject(ctx, f) })
	}
}

// inject performs one fault.
func (s *soak) inject(ctx context.Context, f fault) {
	switch f.kind {
	case faultAPIKill:
		s.killOneOf(f, s.st.apis)
	case faultAPIFreeze:
		svc := s.st.apis[f.target%len(s.st.apis)]
		if svc.freeze(ctx, freezeFor) {
			s.events.note(fmt.Sprintf("fault %s: froze %s for %s", f.kind, svc.label, freezeFor))
			s.count(f.kind, 1)
		} else {
			s.events.note(fmt.Sprintf("fault %s: skipped, %s not running", f.kind, svc.label))
		}
	case faultBackgroundKill:
		// Not the reaper, which has nothing to do in a soak. A worker killed between mailing a
		// receipt and recording it mails it again, which is documented at-least-once behaviour;
		// its jobs stay running until River's rescuer takes them up again
		// (workers.RescueStuckJobsAfter), each a receipt that may go out twice.
		var targets []*service
		for _, svc := range s.st.background {
			if svc.name != "reaper" {
				targets = append(targets, svc)
			}
		}
		s.killOneOf(f, targets)
	case faultDeploy:
		// Every process promises to exit 0 within 10 s of SIGTERM, even with requests and jobs
		// in flight, and to leave nothing behind that a restart cannot pick up.
		all := s.st.services()
		svc := all[f.target%len(all)]
		s.events.note(fmt.Sprintf("fault %s: restarting %s", f.kind, svc.label))
		s.count(f.kind, 1)
		if err := svc.restartWith(nil); err != nil {
			s.fail("%v", err)
		}
	case faultStripe500, faultStripeTimeout, faultStripeDrop:
		if err := s.st.stripe.injectFaults(ctx, stripeFaultNames[f.kind], f.count); err != nil {
			s.faultFailed(f, err)
			return
		}
		s.count(f.kind, f.count)
	case faultRefund500, faultRefundDrop:
		if err := s.st.stripe.injectRefundFaults(ctx, refundFaultNames[f.kind], f.count); err != nil {
			s.faultFailed(f, err)
			return
		}
		s.count(f.kind, f.count)
	case faultDashboardRefund, faultDispute:
		s.dashboardAction(ctx, f)
	case faultStripeLatency:
		s.latencyMu.Lock()
		defer s.latencyMu.Unlock()
		if err := s.st.stripe.setLatency(ctx, f.delay); err != nil {
			s.faultFailed(f, err)
			return
		}
		s.count(f.kind, 1)
		select {
		case <-ctx.Done():
		case <-time.After(f.pause):
		}
		if err := s.st.stripe.setLatency(context.WithoutCancel(ctx), 0); err != nil {
			s.faultFailed(f, err)
		}
	case faultDatabaseRestart:
		s.restartDatabase(ctx, f)
	case faultFailoverKill, faultFailoverFreeze:
		s.failover(ctx, f)
	}
}

// dashboardAction refunds a booked ride's charge from Stripe's dashboard, or has the rider's bank
// dispute it, as f says: Stripe tells the webhook, and the ride must show it. The ride is drawn
// from those booked so far; one whose charge Stripe refuses to act on (a cancel refunded it
// meanwhile) is counted and left, and the next one tried.
func (s *soak) dashboardAction(ctx context.Context, f fault) {
	rides := s.load.bookedRides()
	for i := range min(len(rides), maxDashboardTries) {
		ride := rides[(f.target+i)%len(rides)]
		var err error
		if f.kind == faultDashboardRefund {
			err = s.refundFromDashboard(ctx, ride.chargeID)
		} else {
			err = s.st.stripe.disputeCharge(ctx, ride.chargeID)
		}
		switch {
		case errors.Is(err, errRefused):
			s.mu.Lock()
			s.refusedActions++
			s.mu.Unlock()
			continue
		case err != nil:
			s.faultFailed(f, err)
			return
		}
		s.events.note(fmt.Sprintf("fault %s: ride %d, charge %s", f.kind, ride.id, ride.chargeID))
		s.count(f.kind, 1)
		return
	}
	s.events.note(fmt.Sprintf("fault %s: skipped, no booked ride Stripe would act on", f.kind))
}

// maxDashboardTries bounds the rides a dashboard action tries before it gives up.
const maxDashboardTries = 5

// refundFromDashboard refunds chargeID from the dashboard and notes the refund as the soak's own.
// If the answer was lost, the refund may have been made all the same: the dashboard's refunds are
// the only ones without an idempotency key, so those of the charge are the soak's.
func (s *soak) refundFromDashboard(ctx context.Context, chargeID string) error {
	id, err := s.st.stripe.refundCharge(ctx, chargeID)
	if err != nil && !errors.Is(err, errRefused) {
		if refunds, listErr := s.st.stripe.refunds(context.WithoutCancel(ctx), chargeID); listErr == nil {
			for _, rf := range refunds {
				if rf.IdempotencyKey == "" {
					s.noteDashboardRefund(rf.ID)
				}
			}
		}
		return err
	}
	if err == nil {
		s.noteDashboardRefund(id)
	}
	return err
}

func (s *soak) noteDashboardRefund(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.dashboardRefunds, id) {
		s.dashboardRefunds = append(s.dashboardRefunds, id)
	}
}

func (s *soak) killOneOf(f fault, targets []*service) {
	for i := range targets {
		svc := targets[(f.target+i)%len(targets)]
		if svc.kill() {
			s.events.note(fmt.Sprintf("fault %s: killed %s", f.kind, svc.label))
			s.count(f.kind, 1)
			return
		}
	}
	s.events.note(fmt.Sprintf("fault %s: skipped, nothing running to kill", f.kind))
}

// restartDatabase stops the database, keeps it down for f.pause, and starts it again. Once
// begun it runs to its end whatever ctx says: a soak must not end with its database down.
func (s *soak) restartDatabase(ctx context.Context, f fault) {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	s.events.note("fault db_restart: stopping Postgres")
	if err := s.st.cluster.StopServer(ctx); err != nil {
		s.faultFailed(f, err)
	}
	time.Sleep(f.pause)
	var err error
	for range 3 {
		if err = s.st.cluster.StartServer(ctx); err == nil {
			s.events.note("fault db_restart: Postgres is back")
			s.count(f.kind, 1)
			return
		}
		time.Sleep(time.Second)
	}
	select {
	case s.fatal <- fmt.Errorf("the database did not come back after a restart: %w", err):
	default:
	}
}

func (s *soak) count(kind faultKind, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fired[kind] += n
}

func (s *soak) faultFailed(f fault, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultErrors = append(s.faultErrors, fmt.Sprintf("%s: %v", f, err))
	s.events.note(fmt.Sprintf("fault %s failed: %v", f.kind, err))
}

func (s *soak) firedCounts() map[faultKind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[faultKind]int, len(s.fired))
	for k, v := range s.fired {
		out[k] = v
	}
	return out
}

// progressLine sums up the soak so far in one line.
func (s *soak) progressLine() string {
	var created, cancelled, refused, unknown int
	for _, rec := range s.load.snapshot() {
		switch rec.outcome.Kind {
		case invariants.OutcomeCreated:
			created++
		case invariants.OutcomeCancelled:
			cancelled++
		case invariants.OutcomeRefused:
			refused++
		default:
			unknown++
		}
	}
	fired := s.firedCounts()
	ev := s.events.counts()
	return fmt.Sprintf("calls: %d created, %d cancelled, %d refused, %d unknown, %d in flight | faults: %d api kills, %d self-crashes, %d stripe, %d db restarts",
		created, cancelled, refused, unknown, s.load.inFlight.Load(),
		fired[faultAPIKill], sumOf(ev.selfCrashes), sumOf(ev.stripeFaults), fired[faultDatabaseRestart]+fired[faultFailoverKill]+fired[faultFailoverFreeze])
}
