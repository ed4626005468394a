package invariants

import (
	"fmt"
	"slices"
	"strings"
)

// checkMailbox holds the recorded receipts to the mail that went out. A receipt's Message-ID is
// derived from its ride and is the same on every copy, so emails are matched to rides by it:
// every recorded receipt must have arrived, to its rider, and every email must be a recorded
// receipt.
func (c *checker) checkMailbox(mb *Mailbox) {
	c.report.Emails = len(mb.Emails)
	byMessageID := map[string][]Email{}
	for _, e := range mb.Emails {
		byMessageID[e.MessageID] = append(byMessageID[e.MessageID], e)
	}

	recorded := map[string]bool{}
	for i := range c.snap.rides {
		r := &c.snap.rides[i]
		if r.ReceiptMessageID == nil {
			continue
		}
		recorded[*r.ReceiptMessageID] = true
		emails := byMessageID[*r.ReceiptMessageID]
		if len(emails) == 0 {
			c.violate(RuleReceiptMissing, "ride %d records receipt %s, but no email with that Message-ID reached the mail server",
				r.ID, *r.ReceiptMessageID)
			continue
		}
		if len(emails) > 1 {
			c.report.DuplicateEmails += len(emails) - 1
			desc := fmt.Sprintf("receipt %s of ride %d was delivered %d times", *r.ReceiptMessageID, r.ID, len(emails))
			c.report.Duplicates = append(c.report.Duplicates, desc)
			if mb.StrictDuplicates {
				c.violate(RuleReceiptEmailDuplicate, "%s", desc)
			}
		}
		for _, e := range emails {
			if !slices.ContainsFunc(e.To, func(to string) bool { return strings.EqualFold(to, r.UserEmail) }) {
				c.violate(RuleReceiptEmailUnmatched, "receipt %s of ride %d went to %v, not to its rider %s",
					*r.ReceiptMessageID, r.ID, e.To, r.UserEmail)
			}
		}
	}
	for _, id := range sortedKeys(byMessageID) {
		if !recorded[id] {
			c.violate(RuleReceiptEmailUnmatched, "%d email(s) with Message-ID %q to %v match no recorded receipt",
				len(byMessageID[id]), id, byMessageID[id][0].To)
		}
	}
}
