package invariants

import (
	"fmt"
	"slices"
	"strings"
)

// checkMailbox holds the recorded receipts, of rides and of their refunds, to the mail that went
// out. A receipt's Message-ID is derived from its ride and kind and is the same on every copy,
// so emails are matched to rides by it: every recorded receipt must have arrived, to its rider,
// and every email must be a recorded receipt.
func (c *checker) checkMailbox(mb *Mailbox) {
	c.report.Emails = len(mb.Emails)
	byMessageID := map[string][]Email{}
	for _, e := range mb.Emails {
		byMessageID[e.MessageID] = append(byMessageID[e.MessageID], e)
	}

	recorded := map[string]bool{}
	for i := range c.snap.rides {
		r := &c.snap.rides[i]
		for _, receipt := range []struct {
			what      string
			messageID *string
		}{{"receipt", r.ReceiptMessageID}, {"refund receipt", r.RefundReceiptMessageID}} {
			if receipt.messageID != nil {
				recorded[*receipt.messageID] = true
				c.checkDelivered(mb, r, receipt.what, *receipt.messageID, byMessageID[*receipt.messageID])
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

// checkDelivered holds one recorded receipt of ride r (what: "receipt", "refund receipt") to the
// emails that carry its messageID: at least one, each to the ride's rider, and a copy counted.
func (c *checker) checkDelivered(mb *Mailbox, r *rideRow, what, messageID string, emails []Email) {
	if len(emails) == 0 {
		c.violate(RuleReceiptMissing, "ride %d records %s %s, but no email with that Message-ID reached the mail server",
			r.ID, what, messageID)
		return
	}
	if len(emails) > 1 {
		c.report.DuplicateEmails += len(emails) - 1
		desc := fmt.Sprintf("%s %s of ride %d was delivered %d times", what, messageID, r.ID, len(emails))
		c.report.Duplicates = append(c.report.Duplicates, desc)
		if mb.StrictDuplicates {
			c.violate(RuleReceiptEmailDuplicate, "%s", desc)
		}
	}
	for _, e := range emails {
		if !slices.ContainsFunc(e.To, func(to string) bool { return strings.EqualFold(to, r.UserEmail) }) {
			c.violate(RuleReceiptEmailUnmatched, "%s %s of ride %d went to %v, not to its rider %s",
				what, messageID, r.ID, e.To, r.UserEmail)
		}
	}
}
