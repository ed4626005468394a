package invariants

import (
	"cmp"
	"maps"
	"slices"
)

// receiptJobFinalStates are the River job states a job never leaves by itself.
var receiptJobFinalStates = map[string]bool{"completed": true, "cancelled": true, "discarded": true}

// checkQuiescent finds work left half done: keys still locked or never finished, staged jobs
// that never reached River, and receipt jobs River has not finished with.
//
// Keys recorded for review are no exception. The API records a request for review as it
// finishes its key (with a 500 payment_needs_review), and the reaper records the keys it then
// deletes, so a key that is recorded for review and still locked or unfinished is a bug of its
// own, not a person's case.
func (c *checker) checkQuiescent() {
	for i := range c.snap.keys {
		k := &c.snap.keys[i]
		switch {
		case k.LockedAt != nil:
			c.violate(RuleKeyLocked, "%s is still locked", describeKey(k))
		case k.RecoveryPoint != "finished":
			c.violate(RuleKeyUnfinished, "%s never finished", describeKey(k))
		}
	}
	for _, j := range c.snap.stagedJobs {
		c.violate(RuleStagedJobLeft, "staged job %d (%s %s) never reached the job queue", j.ID, j.JobName, j.JobArgs)
	}
	for _, j := range c.snap.receiptJobs {
		if !receiptJobFinalStates[j.State] {
			c.violate(RuleReceiptJobPending, "%s job %d for ride %s is %s after %d attempts", j.Kind, j.ID, optInt(j.RideID), j.State, j.Attempt)
		}
	}
	c.checkReceiptJobsPerRide()
}

// receiptJobDeadStates are the states of a receipt job that will never mail anything: given
// up by River, or cancelled. Either leaves room for another job of the same ride (an operator's
// retry), which River's uniqueness per ride allows.
var receiptJobDeadStates = map[string]bool{"cancelled": true, "discarded": true}

// checkReceiptJobsPerRide finds rides with more than one live receipt job of one kind: one that
// is yet to run, running, or completed. Each of them mails the receipt (or the refund receipt),
// or has, so two of them mean the rider got it twice, or will; each kind of job is unique per
// ride so that this never happens. (River deletes completed jobs after a day, so against
// production this sees the last day only.)
func (c *checker) checkReceiptJobsPerRide() {
	keys := slices.SortedFunc(maps.Keys(c.receiptJobs), func(a, b receiptJobKey) int {
		return cmp.Or(cmp.Compare(a.rideID, b.rideID), cmp.Compare(a.kind, b.kind))
	})
	for _, k := range keys {
		live := 0
		for _, j := range c.receiptJobs[k] {
			if !receiptJobDeadStates[j.State] {
				live++
			}
		}
		if live > 1 {
			c.violate(RuleReceiptJobDuplicate, "ride %d has %d live %s jobs: %s", k.rideID, live, k.kind, c.describeReceiptJobs(k.kind, k.rideID))
		}
	}
}
