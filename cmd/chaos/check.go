package main

import (
	"context"
	"fmt"

	"github.com/rocketrides/rocketrides/internal/invariants"
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

	report, err := invariants.Check(ctx, s.st.pool, invariants.Observed{
		Charges:  charges,
		Outcomes: outcomes,
		Mailbox:  &invariants.Mailbox{Emails: emails, StrictDuplicates: s.cfg.strictReceipts},
	})
	if err != nil {
		return nil, fmt.Errorf("error checking invariants: %w", err)
	}
	return report, nil
}
