package workers

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

func TestMetrics(t *testing.T) {
	t.Parallel()

	// One job at a time, each to its end, so that the mail server's failures meet the job meant.
	t.Run("CountsEachAttemptByResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := map[string]float64{}
		work := func(ride *models.Ride, opts *river.InsertOpts, final river.EventKind, counted map[string]float64) {
			t.Helper()
			job := b.insertJob(t, receiptArgs(ride), opts)
			if ev := b.waitFinal(t, job); ev.Kind != final {
				t.Fatalf("want job %d to end %s, got %s", job.ID, final, ev.Kind)
			}
			maps.Copy(want, counted)
			b.requireReceipts(t, want)
		}

		work(b.newRide(t, b.rider, "ch_sent"), nil, river.EventKindJobCompleted,
			map[string]float64{metrics.ReceiptSent: 1})

		b.smtp.FailNext(1, "451 4.3.0 Try again later")
		work(b.newRide(t, b.rider, "ch_retried"), nil, river.EventKindJobCompleted,
			map[string]float64{metrics.ReceiptFailed: 1, metrics.ReceiptSent: 2})

		b.smtp.FailNext(1, "554 5.7.1 Rejected")
		work(b.newRide(t, b.rider, "ch_discarded"), &river.InsertOpts{MaxAttempts: 1}, river.EventKindJobFailed,
			map[string]float64{metrics.ReceiptDiscarded: 1})

		work(b.newRide(t, b.rider, ""), nil, river.EventKindJobCancelled, // never charged
			map[string]float64{metrics.ReceiptCancelled: 1})

		// A receipt recorded already is not sent, and not counted.
		recorded := b.newRide(t, b.rider, "ch_recorded")
		if _, err := models.RideReceiptRecord(t.Context(), b.pool, recorded.UserID, recorded.ID, "<recorded@rocketrides.example>"); err != nil {
			t.Fatal(err)
		}
		work(recorded, nil, river.EventKindJobCompleted, nil)
		if n := len(b.smtp.Messages()); n != 2 {
			t.Fatalf("want 2 receipts mailed, got %d", n)
		}

		// River's jobs by state, as the worker process reports them: completed ones left out.
		counts, err := RiverJobsByState(b.pool)(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		wantStates := map[string]int64{}
		for _, state := range rivertype.JobStates() {
			wantStates[string(state)] = 0
		}
		delete(wantStates, string(rivertype.JobStateCompleted))
		wantStates[string(rivertype.JobStateDiscarded)] = 1
		wantStates[string(rivertype.JobStateCancelled)] = 1
		if !maps.Equal(counts, wantStates) {
			t.Fatalf("want River jobs by state %v, got %v", wantStates, counts)
		}
	})

	// Without SMTP_URL, a receipt goes to the log: no rider has it, so it is not counted sent.
	t.Run("CountsLoggedReceiptsApart", func(t *testing.T) {
		t.Parallel()
		b := setupWith(t, func(b *testBundle, deps *Deps) {
			deps.Mailer = mailer.NewLog(slog.New(slog.DiscardHandler))
		})
		job := b.insertJob(t, receiptArgs(b.newRide(t, b.rider, "ch_logged")), nil)
		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		b.requireReceipts(t, map[string]float64{metrics.ReceiptLogged: 1})
		if n, _ := receiptLatencies(t, b.metrics); n != 0 {
			t.Fatalf("want no latency observed for a receipt mailed to nobody, got %d", n)
		}
	})

	// The latency runs from when the job was staged, which the enqueuer writes into the job's
	// metadata, to the mail server's acceptance. A job without it is sent, and not observed.
	t.Run("ObservesReceiptLatencyFromStaging", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const stagedAgo = 3 * time.Second
		metadata, err := jobargs.AddStagedAt(nil, time.Now().Add(-stagedAgo))
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		job := b.insertJob(t, receiptArgs(b.newRide(t, b.rider, "ch_timed")), &river.InsertOpts{Metadata: metadata})
		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		upperBound := stagedAgo + time.Since(before)
		n, sum := receiptLatencies(t, b.metrics)
		if n != 1 || sum < stagedAgo.Seconds() || sum > upperBound.Seconds() {
			t.Fatalf("want one latency between %s and %s, got %d summing to %.3f s", stagedAgo, upperBound, n, sum)
		}

		job = b.insertJob(t, receiptArgs(b.newRide(t, b.rider, "ch_untimed")), nil)
		if ev := b.waitFinal(t, job); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("want the job completed, got %s", ev.Kind)
		}
		b.requireReceipts(t, map[string]float64{metrics.ReceiptSent: 2})
		if n, _ := receiptLatencies(t, b.metrics); n != 1 {
			t.Fatalf("want no latency observed for a job that does not say when it was staged, got %d in all", n)
		}
	})
}

// receiptLatencies returns how many latencies m's rocketrides_receipt_latency_seconds holds and
// their sum in seconds.
func receiptLatencies(t *testing.T, m *metrics.Worker) (count uint64, sum float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.ReceiptLatency)
	families, err := reg.Gather()
	if err != nil || len(families) != 1 {
		t.Fatalf("want one family gathered, got %d (%v)", len(families), err)
	}
	h := families[0].GetMetric()[0].GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// requireReceipts waits up to 5 s for rocketrides_receipts_total to hold want, 0 for any
// result want leaves out: failures are counted from River's events, a moment after the test's
// own subscription saw them.
func (b *testBundle) requireReceipts(t *testing.T, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]float64{}
		for _, result := range []string{metrics.ReceiptSent, metrics.ReceiptLogged, metrics.ReceiptFailed, metrics.ReceiptDiscarded, metrics.ReceiptCancelled} {
			got[result] = testutil.ToFloat64(b.metrics.Receipts.WithLabelValues(result))
		}
		match := true
		for result, n := range got {
			if n != want[result] {
				match = false
			}
		}
		if match {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rocketrides_receipts_total: want %v, got %v", want, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
