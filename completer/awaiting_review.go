package completer

import (
	"context"

	"github.com/rocketrides/rocketrides/models"
)

// RequestsAwaitingReview counts the requests recorded in abandoned_requests, by reason, for the
// gauge that the process registers with metrics.RegisterRequestsAwaitingReview. They are the
// requests that neither their client nor the completer could finish, and that a person must
// look at (admin list-abandoned): a charge Stripe may or may not have made (a payment_needs_review
// answer, whether the API or the completer ran the request), or a key the reaper found
// unfinished. The completer serves the gauge as the process whose work ends in these rows.
//
// Nothing marks a row reviewed yet, so the count only grows until someone deletes the rows
// dealt with; what alerts watch is its increase.
func (c *Completer) RequestsAwaitingReview(ctx context.Context) (map[string]int64, error) {
	return models.AbandonedRequestCountByReason(ctx, c.pool)
}
