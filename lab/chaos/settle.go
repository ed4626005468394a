package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/workers"
)

// Settling bounds, far above what settling takes: the completer needs its min age, or a lock
// timeout for a key a killed API left locked; a receipt needs the enqueuer and a worker, a few
// hundred milliseconds.
const (
	completerWait = 30 * time.Second
	// drainWait lets River's rescuer take up a receipt job that a killed worker, or one cut off
	// from the database, left running just before the soak ended.
	drainWait = workers.ReceiptRescueBound
	// retryJobsAfter is when the drain starts retrying failed receipt jobs at once instead of
	// waiting out River's backoff (attempt⁴ seconds: 16 s after a second failure, 81 s after a
	// third), as an operator would with "retry now". Before it, jobs retry on their own.
	retryJobsAfter = 5 * time.Second
	pollEvery      = 250 * time.Millisecond
)

// settle brings the system back to rest after the soak: the APIs restarted without fault
// points, the calls in progress finished, abandoned keys finished by the completer, every key a
// client gave up on asked about again with the same key, and every receipt sent. Then it stops
// the processes with SIGTERM, each of which must exit 0. Promises broken on the way are
// recorded as failures; an error means settling itself could not go on.
func (s *soak) settle(ctx context.Context) error {
	var err error
	if s.unfinishedAtSoakEnd, err = s.countUnfinished(ctx); err != nil {
		return err
	}
	s.progress("faults stopped with %d keys unfinished; restarting the APIs without FAULTS, and the workers", s.unfinishedAtSoakEnd)
	if err := s.st.stripe.setLatency(ctx, 0); err != nil {
		return err
	}
	// Events held back for reordering go out now, and each once from here on.
	if err := s.st.stripe.setWebhookBehavior(ctx, webhookBehavior{}); err != nil {
		return err
	}
	if charges, refunds, err := s.st.stripe.pendingFaults(ctx); err == nil && len(charges)+len(refunds) > 0 {
		s.progress("%d Stripe faults still queued for charges and %d for refunds; they strike the next ones", len(charges), len(refunds))
	}
	for i, api := range s.st.apis {
		if err := api.restartWith(s.st.apiEnv(i, false, "")); err != nil {
			s.fail("%v", err)
		}
	}
	if err := s.restartWorkers(); err != nil {
		return err
	}
	if err := s.st.waitReady(ctx); err != nil {
		return err
	}

	s.progress("waiting for the calls in flight (%d)", s.load.inFlight.Load())
	s.load.wait()

	// Keys whose clients gave up are the completer's. It takes a key once it is
	// completerMinAge old and idle, or once a dead API's lock on it expired.
	deadline := time.Now().Add(completerWait)
	for {
		if s.unfinishedAfterSettle, err = s.countUnfinished(ctx); err != nil {
			return err
		}
		if s.unfinishedAfterSettle == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	s.progress("%d keys left unfinished by the clients and the completer", s.unfinishedAfterSettle)

	s.redriven = s.load.redrive(ctx)
	s.progress("asked again about %d keys whose outcome a client did not know", s.redriven)

	if err := s.drain(ctx); err != nil {
		return err
	}
	s.progress("stopping the processes")
	s.stopProcesses()
	return nil
}

// countUnfinished counts keys that have not finished.
func (s *soak) countUnfinished(ctx context.Context) (int, error) {
	var n int
	if err := s.st.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE recovery_point <> 'finished'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting unfinished keys: %w", err)
	}
	return n, nil
}

// restartWorkers stops every worker and starts it again, as a deploy would. A receipt job a
// killed worker left running is River's rescuer's, which takes it up again within
// workers.ReceiptRescueBound of its attempt's start, as in production: drain waits for that.
func (s *soak) restartWorkers() error {
	var ws []*service
	for _, svc := range s.st.background {
		if svc.name == "worker" {
			ws = append(ws, svc)
		}
	}
	for _, svc := range ws {
		if err := svc.stop(); err != nil {
			s.fail("%v", err)
		}
	}
	for _, svc := range ws {
		if err := svc.start(); err != nil {
			return err
		}
	}
	return nil
}

// receiptKinds are the jobs of receipts: the ride's, and the refund's of a cancelled ride.
var receiptKinds = []string{jobargs.SendRideReceiptKind, jobargs.SendRefundReceiptKind}

// drain waits until every staged job reached River, River finished every receipt job, every
// booked ride has its receipt recorded and every cancelled one its refund receipt, and every
// refund and dispute Stripe emitted an event of was applied by the webhook. What is still missing
// at the deadline is left for the invariant checker to report in detail.
func (s *soak) drain(ctx context.Context) error {
	riverClient, err := river.NewClient(riverpgxv5.New(s.st.pool), &river.Config{})
	if err != nil {
		return fmt.Errorf("error creating River client: %w", err)
	}
	start := time.Now()
	for {
		var staged, pending, unsent, refundsUnsent int
		err := s.st.pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM staged_jobs),
			       (SELECT count(*) FROM river_job WHERE kind = ANY($1) AND state NOT IN ('completed', 'cancelled', 'discarded')),
			       (SELECT count(*) FROM rides r JOIN idempotency_keys k ON k.id = r.idempotency_key_id
			        WHERE k.response_code = 201 AND r.receipt_sent_at IS NULL),
			       (SELECT count(*) FROM rides r JOIN idempotency_keys k ON k.id = r.cancel_idempotency_key_id
			        WHERE k.response_code = 200 AND r.refund_receipt_sent_at IS NULL)`, receiptKinds).
			Scan(&staged, &pending, &unsent, &refundsUnsent)
		if err != nil {
			return fmt.Errorf("error watching the drain: %w", err)
		}
		unapplied := -1 // not looked at yet
		if staged == 0 && pending == 0 && unsent == 0 && refundsUnsent == 0 {
			if unapplied, err = s.unappliedEvents(ctx); err != nil {
				return err
			}
			if unapplied == 0 {
				s.progress("drained in %.1fs", time.Since(start).Seconds())
				return s.countRescuedJobs(ctx)
			}
		}
		if time.Since(start) > drainWait {
			s.progress("not drained after %s: %d staged jobs, %d receipt jobs pending (%s), %d receipts and %d refund receipts unsent, %d Stripe events unapplied (-1: not counted)",
				drainWait, staged, pending, s.pendingJobStates(ctx), unsent, refundsUnsent, unapplied)
			return s.countRescuedJobs(ctx)
		}
		if time.Since(start) > retryJobsAfter {
			if err := s.retryWaitingJobs(ctx, riverClient); err != nil {
				return err
			}
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// countRescuedJobs counts the receipt jobs that River's rescuer took up again after they were
// left running, by a worker killed or cut off from the database mid-attempt: each may have
// mailed its receipt before, and duplicateReceiptBound counts one copy for each.
func (s *soak) countRescuedJobs(ctx context.Context) error {
	var n int
	err := s.st.pool.QueryRow(ctx, `
		SELECT count(*) FROM river_job
		WHERE kind = ANY($1) AND EXISTS (SELECT FROM unnest(errors) e WHERE e->>'error' = $2)`,
		receiptKinds, riverRescueError).Scan(&n)
	if err != nil {
		return fmt.Errorf("error counting receipt jobs River rescued: %w", err)
	}
	s.mu.Lock()
	s.jobsRescued = n
	s.mu.Unlock()
	return nil
}

// riverRescueError is the error River's rescuer records on each job it takes up again.
const riverRescueError = "Stuck job rescued by JobRescuer"

// unappliedEvents counts the events of refunds and disputes that Stripe emitted and that the
// webhook has not applied (recorded in stripe_events) yet.
func (s *soak) unappliedEvents(ctx context.Context) (int, error) {
	events, err := s.st.stripe.webhookEvents(ctx)
	if err != nil {
		return 0, err
	}
	rows, err := s.st.pool.Query(ctx, `SELECT id FROM stripe_events`)
	if err != nil {
		return 0, fmt.Errorf("error reading Stripe events: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("error reading Stripe events: %w", err)
	}
	applied := make(map[string]bool, len(ids))
	for _, id := range ids {
		applied[id] = true
	}
	n := 0
	for _, raw := range events {
		var ev struct{ ID, Type string }
		if err := json.Unmarshal(raw, &ev); err != nil {
			return 0, fmt.Errorf("error reading a Stripe event: %w", err)
		}
		if (ev.Type == phases.EventChargeRefunded || ev.Type == phases.EventChargeDisputeCreated) && !applied[ev.ID] {
			n++
		}
	}
	return n, nil
}

// pendingJobStates says which states the receipt jobs left pending are in, and how many are in
// each, attempts included: what to look at when a drain runs out of time.
func (s *soak) pendingJobStates(ctx context.Context) string {
	var states string
	err := s.st.pool.QueryRow(ctx, `
		SELECT coalesce(string_agg(kind || ' ' || state || ' attempt ' || attempt || ': ' || n, ', '), 'none')
		FROM (SELECT kind, state::text, attempt, count(*) AS n FROM river_job
		      WHERE kind = ANY($1) AND state NOT IN ('completed', 'cancelled', 'discarded')
		      GROUP BY kind, state, attempt ORDER BY kind, state, attempt) AS pending`, receiptKinds).Scan(&states)
	if err != nil {
		return "states unknown: " + err.Error()
	}
	return states
}

// retryWaitingJobs makes receipt jobs waiting for a retry available now.
func (s *soak) retryWaitingJobs(ctx context.Context, riverClient *river.Client[pgx.Tx]) error {
	rows, err := s.st.pool.Query(ctx, `SELECT id FROM river_job WHERE kind = ANY($1) AND state IN ('retryable', 'scheduled')`, receiptKinds)
	if err != nil {
		return fmt.Errorf("error finding waiting receipt jobs: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("error finding waiting receipt jobs: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := riverClient.JobRetry(ctx, id); err != nil {
			return fmt.Errorf("error retrying receipt job %d: %w", id, err)
		}
		s.jobsRetriedEarly++
		s.events.note(fmt.Sprintf("retrying receipt job %d now", id))
	}
	return nil
}

// stopProcesses stops every process of Rocket Rides at once with SIGTERM, as a deploy does. Each
// promises to exit 0 within 10 s; one that does not is a failure.
func (s *soak) stopProcesses() {
	var wg sync.WaitGroup
	for _, svc := range s.st.services() {
		wg.Go(func() {
			if err := svc.stop(); err != nil {
				s.fail("%v", err)
			}
		})
	}
	wg.Wait()
}

func (s *soak) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
	s.events.note("FAILURE: " + msg)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
