package invariants

// receiptJobFinalStates are the River job states a job never leaves by itself.
var receiptJobFinalStates = map[string]bool{"completed": true, "cancelled": true, "discarded": true}

// checkQuiescent finds work left half done: keys still locked or never finished (other than
// those recorded for a person), staged jobs that never reached River, and receipt jobs River
// has not finished with.
func (c *checker) checkQuiescent() {
	for i := range c.snap.keys {
		k := &c.snap.keys[i]
		if c.forReviewKeyIDs[k.ID] {
			continue
		}
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
			c.violate(RuleReceiptJobPending, "receipt job %d for ride %s is %s after %d attempts", j.ID, optInt(j.RideID), j.State, j.Attempt)
		}
	}
}
