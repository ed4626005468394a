package bootstrap

import (
	"fmt"

	"github.com/rocketrides/rocketrides/completer"
	"github.com/rocketrides/rocketrides/phases"
)

// checkRules checks every rule that ties two settings together: this is their one home. A
// package's own Config checks at most its single settings, and LoadConfig each variable's range.
// executor is the phase executor's configuration with its defaults filled in, the settings the
// executor will run with. The rules:
//
//   - A Stripe call can be answered within its request: STRIPE_TIMEOUT is under the executor's
//     RequestTimeout.
//   - A charge is sent with the key's Stripe idempotency key only while Stripe remembers it.
//     prepareStripeCall lets a charge go out only within StripeKeyMaxAge of the first attempt, and
//     the charge then goes out within the same run, which RequestTimeout bounds, or not at all
//     (an expired context sends nothing). So the last use of a key is at most StripeKeyMaxAge
//     plus RequestTimeout after its first, which must be under phases.StripeKeyMemory. This
//     holds whatever happens to the lease: a process frozen past it finds its context expired
//     when it wakes.
//   - A phase's timeout leaves its conflict retries their whole budget.
//   - The completer gets a key before the reaper: it takes keys older than COMPLETER_MIN_AGE
//     and younger than REAP_AFTER less completer.ReapMargin, which must leave it some.
//   - A key is reaped only once Stripe has forgotten its Stripe key: REAP_AFTER exceeds
//     phases.StripeKeyMemory. The Stripe key derives from the rider and the client's key
//     (phases.StripeIdempotencyKey), so a rider who used the client key again after the reaper
//     deleted it, while Stripe still remembered, would be answered the old charge for a new
//     ride, which nobody paid for.
//
// A Stripe call needs no bound against the lease: the request renews its lease every third of
// it while the call runs, so the lease survives two failed renewals. If the process freezes, the
// lease runs out, another request takes the key over, and the frozen one is fenced out; if both
// reach Stripe, they send one idempotency key, and Stripe charges once.
func checkRules(cfg *Config, executor phases.Config) []string {
	var errs []string
	if cfg.StripeTimeout >= executor.RequestTimeout {
		errs = append(errs, fmt.Sprintf("STRIPE_TIMEOUT (%s) must be under the request timeout (%s), or no charge could be answered within its request",
			cfg.StripeTimeout, executor.RequestTimeout))
	}
	if lastUse := executor.StripeKeyMaxAge + executor.RequestTimeout; lastUse >= phases.StripeKeyMemory {
		errs = append(errs, fmt.Sprintf("a charge's Stripe key may be used up to %s after its first use (the Stripe key's max age %s plus the request timeout %s), past Stripe's memory of %s",
			lastUse, executor.StripeKeyMaxAge, executor.RequestTimeout, phases.StripeKeyMemory))
	}
	if executor.PhaseTimeout <= executor.ConflictRetryBudget {
		errs = append(errs, fmt.Sprintf("the phase timeout (%s) must exceed the conflict retry budget (%s)",
			executor.PhaseTimeout, executor.ConflictRetryBudget))
	}
	if cfg.ReapAfter <= phases.StripeKeyMemory {
		errs = append(errs, fmt.Sprintf("REAP_AFTER (%s) must exceed Stripe's memory of idempotency keys (%s), or a client key used again after the reaper could be answered with the old charge",
			cfg.ReapAfter, phases.StripeKeyMemory))
	}
	if cfg.ReapAfter-completer.ReapMargin <= cfg.CompleterMinAge {
		errs = append(errs, fmt.Sprintf("REAP_AFTER (%s) must exceed COMPLETER_MIN_AGE (%s) by more than %s, or the completer would never get a key before the reaper",
			cfg.ReapAfter, cfg.CompleterMinAge, completer.ReapMargin))
	}
	return errs
}
