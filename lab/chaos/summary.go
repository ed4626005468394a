package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rocketrides/rocketrides/internal/testing/invariants"
)

// summary is what a soak did and found: printed as a table, and written as JSON for the test
// and for anyone comparing runs.
type summary struct {
	Seed     uint64 `json:"seed"`
	Duration string `json:"duration"`
	Clients  int    `json:"clients"`
	LogFile  string `json:"log_file"`

	// Requests counts the rides clients asked for during the soak (a double tap counts twice);
	// Redriven the keys asked about again afterwards. Outcomes are by kind, re-drives included.
	Requests    int            `json:"requests"`
	Redriven    int            `json:"redriven"`
	CallsByMode map[string]int `json:"calls_by_mode"`
	Outcomes    map[string]int `json:"outcomes"`
	Attempts    int            `json:"attempts"`
	Retries     int            `json:"retries"`
	Replays     int            `json:"replays"`

	// Faults counts the faults that fired, by kind; StripeFaultsQueued those asked of the Stripe
	// stand-in, which fire only when a charge (or for a refund fault, a refund) request comes to
	// take them. RefusedDashboardActions counts the dashboard refunds and disputes Stripe
	// refused, the ride's charge refunded or disputed already.
	Faults                  map[string]int `json:"faults"`
	RefusedDashboardActions int            `json:"refused_dashboard_actions"`
	SelfCrashesByPoint      map[string]int `json:"self_crashes_by_point"`
	StallsByPoint           map[string]int `json:"stalls_by_point"`
	StripeFaultsQueued      map[string]int `json:"stripe_faults_queued"`
	FaultErrors             []string       `json:"fault_errors,omitempty"`
	ProcessStarts           map[string]int `json:"process_starts"`

	UnfinishedAtSoakEnd     int `json:"unfinished_at_soak_end"`
	UnfinishedAfterSettle   int `json:"unfinished_after_settle"`
	CompleterFinished       int `json:"completer_finished"`
	Fenced                  int `json:"fenced"`
	ReceiptJobsRetriedEarly int `json:"receipt_jobs_retried_early"`
	ReceiptJobsRescued      int `json:"receipt_jobs_rescued"` // left running by a worker killed or cut off; River's rescuer took them up
	ReceiptRaces            int `json:"receipt_races"`
	// ReceiptDelayMax is the longest, in seconds, from a receipt's staging to its mailing.
	ReceiptDelayMax      float64 `json:"receipt_delay_max_s"`
	StripeChargeRequests int     `json:"stripe_charge_requests"`

	// AnswersByStatus counts the API's answers to every attempt; a 500 is a broken promise
	// (a failure), since no fault of the soak leaves the server unsure of anything but what a
	// 503 says. Unavailable is each failover's, in seconds: from the primary's loss to the
	// first ride booked after it.
	AnswersByStatus map[string]int `json:"answers_by_status"`
	Unavailable     []float64      `json:"unavailable_s,omitempty"`

	Keys             int      `json:"keys"`
	KeysCreated      int      `json:"keys_created"`
	KeysCancelled    int      `json:"keys_cancelled"`
	KeysRefused      int      `json:"keys_refused"`
	Rides            int      `json:"rides"`
	ChargedRides     int      `json:"charged_rides"`
	CancelledRides   int      `json:"cancelled_rides"`
	RefundedRides    int      `json:"refunded_rides"`
	DisputedRides    int      `json:"disputed_rides"`
	SucceededCharges int      `json:"succeeded_charges"`
	FailedCharges    int      `json:"failed_charges"`
	Refunds          int      `json:"refunds"`
	DashboardRefunds int      `json:"dashboard_refunds"`
	StripeEvents     int      `json:"stripe_events"` // applied by the webhook
	Receipts         int      `json:"receipts"`
	RefundReceipts   int      `json:"refund_receipts"`
	Emails           int      `json:"emails"`
	DuplicateEmails  int      `json:"duplicate_emails"`
	DuplicateBound   int      `json:"duplicate_bound"` // the copies allowed (see duplicateReceiptBound)
	Duplicates       []string `json:"duplicates,omitempty"`
	ForReview        []string `json:"for_review,omitempty"`

	// Checked is true once the invariants were checked; a soak cut short never gets there.
	Checked    bool     `json:"checked"`
	Violations []string `json:"violations"`
	Failures   []string `json:"failures"`

	Timings struct {
		BringUp float64 `json:"bring_up_s"`
		Soak    float64 `json:"soak_s"`
		Settle  float64 `json:"settle_s"`
		Check   float64 `json:"check_s"`
		Total   float64 `json:"total_s"`
	} `json:"timings"`
}

// addSoak takes in the calls, the faults and the processes of the soak.
func (sum *summary) addSoak(s *soak) {
	sum.CallsByMode, sum.Outcomes = map[string]int{}, map[string]int{}
	for _, rec := range s.load.snapshot() {
		sum.CallsByMode[string(rec.mode)]++
		if rec.mode != modeRedrive {
			sum.Requests++
		}
		sum.Attempts += rec.attempts
		sum.Retries += max(rec.attempts-1, 0)
		if rec.replayed {
			sum.Replays++
		}
		sum.Outcomes[outcomeLabel(rec)]++
	}
	sum.Redriven = s.redriven
	sum.Faults, sum.StripeFaultsQueued = map[string]int{}, map[string]int{}
	s.mu.Lock()
	pendingRefundFaults := s.refundFaultsPending
	s.mu.Unlock()
	for kind, n := range s.firedCounts() {
		switch name, refund := refundFaultNames[kind]; {
		case stripeFaultNames[kind] != "":
			sum.StripeFaultsQueued[stripeFaultNames[kind]] = n
		case refund:
			// Queued, less what was still queued at the end; unknown (0) if the stand-in could
			// not be asked.
			sum.StripeFaultsQueued[string(kind)] = n
			if pendingRefundFaults != nil {
				sum.Faults[string(kind)] = n - pendingRefundFaults[name]
			}
		default:
			sum.Faults[string(kind)] = n
		}
	}
	s.mu.Lock()
	sum.FaultErrors = append(sum.FaultErrors, s.faultErrors...)
	sum.Failures = append(sum.Failures, s.failures...)
	sum.RefusedDashboardActions = s.refusedActions
	sum.DashboardRefunds = len(s.dashboardRefunds)
	s.mu.Unlock()
	sum.ProcessStarts = map[string]int{}
	for _, svc := range s.st.services() {
		sum.ProcessStarts[svc.label] = svc.counts().starts
	}
	sum.UnfinishedAtSoakEnd, sum.UnfinishedAfterSettle = s.unfinishedAtSoakEnd, s.unfinishedAfterSettle
	sum.ReceiptJobsRetriedEarly = s.jobsRetriedEarly
	sum.ReceiptJobsRescued = s.jobsRescued
	sum.ReceiptDelayMax = s.receiptDelayMaxSeconds
	sum.StripeChargeRequests = s.stripeChargeRequests
	sum.DuplicateBound = s.duplicateReceiptBound()
	sum.AnswersByStatus = map[string]int{}
	for status, n := range s.load.answers.statuses() {
		sum.AnswersByStatus[strconv.Itoa(status)] = n
	}
	s.mu.Lock()
	for _, d := range s.unavailable {
		sum.Unavailable = append(sum.Unavailable, d.Seconds())
	}
	s.mu.Unlock()
}

// addRaces takes in the race detector's reports in the processes' output, each a failure. A
// chaos built with -race, as TestSoak's is, builds the processes with it (supervisor.Build).
func (sum *summary) addRaces(reports []string) {
	for _, r := range reports {
		sum.Failures = append(sum.Failures, "data race in "+r)
	}
}

// addEvents takes in what the processes' logs told.
func (sum *summary) addEvents(l *eventLog) {
	c := l.counts()
	if sum.Faults == nil {
		sum.Faults = map[string]int{}
	}
	sum.Faults["api_self_crash"] = sumOf(c.selfCrashes)
	sum.SelfCrashesByPoint = c.selfCrashes
	sum.Faults["api_stall"] = sumOf(c.stalls)
	sum.StallsByPoint = c.stalls
	// The stand-in logs a fault alike whether it struck a charge or a refund: the refund faults
	// that struck (counted by addSoak) are taken off the charges'.
	for kind, name := range stripeFaultNames {
		sum.Faults[string(kind)] = c.stripeFaults[name]
		for refundKind, refundName := range refundFaultNames {
			if refundName == name {
				sum.Faults[string(kind)] -= sum.Faults[string(refundKind)]
			}
		}
	}
	sum.CompleterFinished = c.completerFinished
	sum.Fenced = c.fenced
	sum.ReceiptRaces = c.receiptRaces
}

// addReport takes in the invariant checker's report, and the failures found while checking.
func (sum *summary) addReport(r *invariants.Report) {
	sum.Checked = true
	sum.Keys, sum.KeysCreated, sum.KeysCancelled, sum.KeysRefused = r.Keys, r.KeysCreated, r.KeysCancelled, r.KeysRefused
	sum.Rides, sum.ChargedRides, sum.Receipts = r.Rides, r.ChargedRides, r.ReceiptsRecorded
	sum.CancelledRides, sum.RefundedRides, sum.DisputedRides = r.CancelledRides, r.RefundedRides, r.DisputedRides
	sum.SucceededCharges, sum.FailedCharges = r.SucceededCharges, r.FailedCharges
	sum.Refunds, sum.RefundReceipts, sum.StripeEvents = r.Refunds, r.RefundReceipts, r.StripeEvents
	sum.Emails, sum.DuplicateEmails, sum.Duplicates = r.Emails, r.DuplicateEmails, r.Duplicates
	sum.ForReview = r.ForReview
	for _, v := range r.Violations {
		sum.Violations = append(sum.Violations, v.String())
	}
}

// outcomeLabel names how a call ended, for counting.
func outcomeLabel(rec record) string {
	switch rec.outcome.Kind {
	case invariants.OutcomeCreated, invariants.OutcomeCancelled:
		if rec.replayed {
			return string(rec.outcome.Kind) + " (replayed)"
		}
		return string(rec.outcome.Kind)
	case invariants.OutcomeRefused:
		return fmt.Sprintf("refused %d %s", rec.outcome.StatusCode, rec.outcome.Code)
	}
	switch {
	case rec.clientErr != nil:
		return "client error"
	case rec.mode == modeAbandoned:
		return "unknown (abandoned by the app)"
	default:
		return "unknown (client gave up)"
	}
}

func (sum *summary) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(label string, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t%s\n", label, fmt.Sprintf(format, args...))
	}
	section := func(title string) { fmt.Fprintf(tw, "%s\t\n", title) }

	section(fmt.Sprintf("\nChaos soak: seed %d, %s, %d clients", sum.Seed, sum.Duration, sum.Clients))
	section("Requests")
	row("ride requests", "%d client calls, bookings and cancels", sum.Requests)
	row("calls by kind", "%s", formatCounts(sum.CallsByMode))
	row("HTTP attempts", "%d (%d retries)", sum.Attempts, sum.Retries)
	row("answers by status", "%s", formatCounts(sum.AnswersByStatus))
	row("replayed answers", "%d", sum.Replays)
	row("asked again after unknown", "%d keys", sum.Redriven)
	section("Outcomes")
	for _, label := range slices.Sorted(maps.Keys(sum.Outcomes)) {
		row(label, "%d", sum.Outcomes[label])
	}
	section("Faults fired")
	for _, kind := range slices.Sorted(maps.Keys(sum.Faults)) {
		detail := ""
		switch {
		case kind == "api_self_crash":
			detail = " (" + formatCounts(sum.SelfCrashesByPoint) + ")"
		case kind == "api_stall":
			detail = " (" + formatCounts(sum.StallsByPoint) + ")"
		case stripeFaultNames[faultKind(kind)] != "":
			detail = fmt.Sprintf(" of %d queued", sum.StripeFaultsQueued[stripeFaultNames[faultKind(kind)]])
		case refundFaultNames[faultKind(kind)] != "":
			detail = fmt.Sprintf(" of %d queued", sum.StripeFaultsQueued[kind])
		case kind == string(faultDashboardRefund) || kind == string(faultDispute):
			detail = fmt.Sprintf(" (%d refused in all: the charge was refunded or disputed already)", sum.RefusedDashboardActions)
		}
		row(kind, "%d%s", sum.Faults[kind], detail)
	}
	if len(sum.FaultErrors) > 0 {
		row("faults that failed", "%d", len(sum.FaultErrors))
	}
	row("process starts", "%s", formatCounts(sum.ProcessStarts))
	section("Recovery")
	row("keys unfinished", "%d when the faults stopped, %d once clients and completer were done", sum.UnfinishedAtSoakEnd, sum.UnfinishedAfterSettle)
	row("keys the completer finished", "%d", sum.CompleterFinished)
	row("stalled requests fenced off", "%d (answered 409 after losing their key)", sum.Fenced)
	row("receipt jobs retried early", "%d", sum.ReceiptJobsRetriedEarly)
	row("receipt jobs rescued", "%d (left running by a worker killed or cut off from the database)", sum.ReceiptJobsRescued)
	row("longest receipt", "%.1f s from its staging to the mail server (bound: workers.ReceiptRescueBound and the outages)", sum.ReceiptDelayMax)
	if len(sum.Unavailable) > 0 {
		row("failovers", "%d; seconds from the primary's loss to the first ride booked: %s, median %.1f",
			len(sum.Unavailable), formatSeconds(sum.Unavailable), median(sum.Unavailable))
	}
	section("State")
	row("idempotency keys", "%d (%d created, %d cancelled, %d refused)", sum.Keys, sum.KeysCreated, sum.KeysCancelled, sum.KeysRefused)
	row("rides", "%d (%d charged; %d cancelled, %d refunded from the dashboard, %d disputed)",
		sum.Rides, sum.ChargedRides, sum.CancelledRides, sum.RefundedRides, sum.DisputedRides)
	row("Stripe", "%d charge requests, %d succeeded charges, %d declined; %d refunds (%d from the dashboard); %d events applied by the webhook",
		sum.StripeChargeRequests, sum.SucceededCharges, sum.FailedCharges, sum.Refunds, sum.DashboardRefunds, sum.StripeEvents)
	row("receipts", "%d recorded, %d refund receipts, %d emails (%d duplicate deliveries, %d allowed)",
		sum.Receipts, sum.RefundReceipts, sum.Emails, sum.DuplicateEmails, sum.DuplicateBound)
	row("for review", "%d", len(sum.ForReview))
	section("Timings")
	row("seconds", "bring-up %.1f, soak %.1f, settle %.1f, check %.1f, total %.1f",
		sum.Timings.BringUp, sum.Timings.Soak, sum.Timings.Settle, sum.Timings.Check, sum.Timings.Total)
	_ = tw.Flush() // stdout; nothing to do if it fails

	for _, s := range sum.ForReview {
		fmt.Fprintf(w, "FOR REVIEW  %s\n", s)
	}
	for i, s := range sum.Duplicates {
		if i == maxDuplicatesPrinted {
			fmt.Fprintf(w, "DUPLICATE   ... and %d more\n", len(sum.Duplicates)-i)
			break
		}
		fmt.Fprintf(w, "DUPLICATE   %s\n", s)
	}
	for _, s := range sum.FaultErrors {
		fmt.Fprintf(w, "FAULT ERROR %s\n", s)
	}
	for _, s := range sum.Failures {
		fmt.Fprintf(w, "FAILURE     %s\n", s)
	}
	for _, s := range sum.Violations {
		fmt.Fprintf(w, "VIOLATION   %s\n", s)
	}
	switch {
	case !sum.Checked:
		fmt.Fprintf(w, "\nThe soak did not run to its end; the invariants were not checked.\n")
	case len(sum.Violations)+len(sum.Failures) == 0:
		fmt.Fprintf(w, "\nEvery invariant held.\n")
	}
}

// maxDuplicatesPrinted bounds the receipts mailed twice that the summary lists one by one; the
// JSON summary has them all.
const maxDuplicatesPrinted = 20

func (sum *summary) writeJSON(path string) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return fmt.Errorf("error encoding summary: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("error writing summary: %w", err)
	}
	return nil
}

func formatCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// formatSeconds writes durations in seconds, one decimal each.
func formatSeconds(seconds []float64) string {
	parts := make([]string, len(seconds))
	for i, s := range seconds {
		parts[i] = strconv.FormatFloat(s, 'f', 1, 64)
	}
	return strings.Join(parts, ", ")
}

// median returns the median of values, which must not be empty.
func median(values []float64) float64 {
	sorted := slices.Sorted(slices.Values(values))
	mid := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[mid-1] + sorted[mid]) / 2
	}
	return sorted[mid]
}
