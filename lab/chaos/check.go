package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/invariants"
	"github.com/rocketrides/rocketrides/workers"
)

// check gathers what Stripe, the mail server and the clients saw, and holds the database to
// it. It also turns process exits that no fault explains into failures: a process that dies by
// itself is a bug even when the data came out right.
func (s *soak) check(ctx context.Context) (*invariants.Report, error) {
	charges, requests, err := s.st.stripe.charges(ctx)
	if err != nil {
		return nil, err
	}
	s.stripeChargeRequests = requests
	refunds, err := s.st.stripe.refunds(ctx, "")
	if err != nil {
		return nil, err
	}
	// Settle waited for every event to be applied; what it did not see applied, the checker
	// reports.
	events, err := s.st.stripe.webhookEvents(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.notePendingRefundFaults(ctx); err != nil {
		return nil, err
	}

	var emails []invariants.Email
	for _, m := range s.st.smtp.Messages() {
		e := invariants.Email{To: m.To}
		if msg, err := m.Parse(); err == nil {
			e.MessageID = msg.Header.Get("Message-Id")
		}
		emails = append(emails, e) // unparsable, it matches no receipt, and is reported so
	}

	var outcomes []invariants.ClientOutcome
	for _, rec := range s.load.snapshot() {
		if rec.clientErr != nil {
			s.fail("a client call ended with an error that is no answer of package client: %v", rec.clientErr)
		}
		outcomes = append(outcomes, rec.outcome)
	}

	if n := s.load.answers.statuses()[http.StatusInternalServerError]; n > 0 {
		s.fail("the API answered 500 to %d attempts: a server unsure of an outcome must say 503, and retrying finds out", n)
	}

	apiExits := 0
	for _, svc := range s.st.apis {
		apiExits += svc.counts().unexpectedExits
	}
	if crashes := sumOf(s.events.counts().selfCrashes); apiExits > crashes {
		s.fail("API replicas exited by themselves %d times, but only %d were crash faults", apiExits, crashes)
	}
	for _, svc := range s.st.background {
		if n := svc.counts().unexpectedExits; n > 0 {
			s.fail("%s exited by itself %d times", svc.label, n)
		}
	}

	s.mu.Lock()
	dashboardRefunds := slices.Clone(s.dashboardRefunds)
	s.mu.Unlock()
	report, err := invariants.Check(ctx, s.st.pool, invariants.Observed{
		Charges:          charges,
		Refunds:          refunds,
		DashboardRefunds: dashboardRefunds,
		Webhooks:         &invariants.Webhooks{Events: events},
		Outcomes:         outcomes,
		Mailbox:          &invariants.Mailbox{Emails: emails, StrictDuplicates: s.cfg.strictReceipts},
	})
	if err != nil {
		return nil, fmt.Errorf("error checking invariants: %w", err)
	}

	// A request set aside for review breaks no invariant: it is the system asking a person for
	// help, which production allows. None of the soak's faults gives cause to (Stripe's 500s
	// here are never saved under the key, no key gets near Stripe's 24 hours, no customer
	// changes, no reaper runs), so each one is a request the system wrongly gave up on.
	for _, r := range report.ForReview {
		s.fail("a request was set aside for review, which no fault of the soak justifies: %s", r)
	}
	if bound := s.duplicateReceiptBound(); report.DuplicateEmails > bound {
		s.fail("%d copies of receipts were mailed, more than the %d the receipt contract allows (-max-duplicate-receipts): %s",
			report.DuplicateEmails, bound, firstFew(report.Duplicates, 5))
	}
	if err := s.checkReceiptDelays(ctx); err != nil {
		return nil, err
	}
	return report, nil
}

// checkReceiptDelays holds every receipt mailed, of a ride or of a refund, to the bound
// docs/receipts.md states: within workers.ReceiptRescueBound of its staging, and of the
// attempt a fault caught in flight, to which the time the database was down during the soak is
// added. A receipt job left running until River's default rescue, an hour, is never mailed
// within the soak and is reported as unsent instead.
func (s *soak) checkReceiptDelays(ctx context.Context) error {
	bound := workers.ReceiptRescueBound
	s.mu.Lock()
	for _, d := range s.unavailable {
		bound += d
	}
	s.mu.Unlock()
	err := s.st.pool.QueryRow(ctx, `
		SELECT coalesce(extract(epoch FROM max(finalized_at - (metadata->>$2)::timestamptz)), 0)
		FROM river_job WHERE kind = ANY($1) AND state = 'completed' AND metadata ? $2`,
		receiptKinds, jobargs.StagedAtKey).Scan(&s.receiptDelayMaxSeconds)
	if err != nil {
		return fmt.Errorf("error reading receipt delays: %w", err)
	}
	rows, err := s.st.pool.Query(ctx, `
		SELECT kind, args->>'ride_id', extract(epoch FROM finalized_at - (metadata->>$2)::timestamptz)
		FROM river_job
		WHERE kind = ANY($1) AND state = 'completed' AND metadata ? $2
		  AND finalized_at - (metadata->>$2)::timestamptz > make_interval(secs => $3)
		ORDER BY 3 DESC`, receiptKinds, jobargs.StagedAtKey, bound.Seconds())
	if err != nil {
		return fmt.Errorf("error reading receipt delays: %w", err)
	}
	var late []string
	for rows.Next() {
		var (
			kind, rideID string
			seconds      float64
		)
		if err := rows.Scan(&kind, &rideID, &seconds); err != nil {
			return fmt.Errorf("error reading receipt delays: %w", err)
		}
		late = append(late, fmt.Sprintf("%s of ride %s after %.1f s", kind, rideID, seconds))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reading receipt delays: %w", err)
	}
	if len(late) > 0 {
		s.fail("%d receipts were mailed later than %s after they were staged (workers.ReceiptRescueBound and the outages): %s",
			len(late), bound.Round(time.Second), firstFew(late, 5))
	}
	return nil
}

// notePendingRefundFaults notes the refund faults still queued at Stripe, which never struck:
// the stand-in logs a fault that strikes a refund as it does one that strikes a charge, so the
// summary tells them apart by what is left of the queue.
func (s *soak) notePendingRefundFaults(ctx context.Context) error {
	_, pending, err := s.st.stripe.pendingFaults(ctx)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, name := range pending {
		counts[name]++
	}
	s.mu.Lock()
	s.refundFaultsPending = counts
	s.mu.Unlock()
	return nil
}

// duplicateReceiptBound is how many copies of receipts (of rides and of refunds) the soak may
// mail, beyond the one each gets: -max-duplicate-receipts if given, else the receipt contract's
// bound. Receipts are sent at least once: a worker that cannot record a receipt it has mailed
// within workers.RecordTimeout mails it again on the job's retry. So copies come only from the
// jobs in flight when a worker died, or lost its database for longer than that timeout. A job
// in flight on a worker the soak killed, or cut off from the database, stays running until
// River's rescuer takes it up again (see countRescuedJobs), so each rescued job may be one copy.
// The database restarts (2 s at most) and tuned failovers are shorter than the timeout, and for
// each outage that was not (a failover with pg_auto_failover's default timing), every worker may
// mail its jobs in flight again: its concurrency (workers.ConcurrencyDefault). One more is
// allowed for a restart that a loaded machine stretches past the timeout, unseen; a bug that
// mails twice does so by the dozen.
func (s *soak) duplicateReceiptBound() int {
	if s.cfg.maxDuplicates >= 0 {
		return s.cfg.maxDuplicates
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	long := 0
	for _, d := range s.unavailable {
		if d > workers.RecordTimeout {
			long++
		}
	}
	return 1 + s.jobsRescued + long*s.cfg.workers*workers.ConcurrencyDefault
}

// firstFew joins the first n of list, and says how many more there are: a bug that mails every
// receipt twice must not print a thousand lines.
func firstFew(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(list[:n], "; "), len(list)-n)
}
