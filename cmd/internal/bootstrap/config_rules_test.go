package bootstrap

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/phases"
)

// TestCheckRules pins each rule of checkRules: a case breaking it is refused in its words, and
// the defaults break none.
func TestCheckRules(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		modify   func(cfg *Config)
		executor phases.Config
		want     string // "": no rule broken
	}{
		{"Defaults", nil, phases.Config{}, ""},
		{"StripeTimeoutPastTheRequest", func(cfg *Config) { cfg.StripeTimeout = time.Minute }, phases.Config{}, "under the request timeout"},
		{"RequestShorterThanTheStripeTimeout", nil, phases.Config{RequestTimeout: 10 * time.Second}, "under the request timeout"},
		// 23 h 59 min 30 s plus 45 s of request: a charge could go out after Stripe forgot its key.
		{"StripeKeyUsedPastStripesMemory", nil, phases.Config{StripeKeyMaxAge: 23*time.Hour + 59*time.Minute + 30*time.Second}, "past Stripe's memory"},
		{"LongRequestPastStripesMemory", nil, phases.Config{RequestTimeout: 2 * time.Hour}, "past Stripe's memory"},
		{"PhaseTimeoutWithinRetryBudget", nil, phases.Config{PhaseTimeout: time.Second, ConflictRetryBudget: 2 * time.Second}, "conflict retry budget"},
		{"ReapedWithinStripesMemory", func(cfg *Config) { cfg.ReapAfter = 24 * time.Hour }, phases.Config{}, "Stripe's memory of idempotency keys"},
		// 26 hours of reap age leave the completer the keys under 25 hours old.
		{"CompleterMinAgePastTheReapMargin", func(cfg *Config) { cfg.ReapAfter, cfg.CompleterMinAge = 26*time.Hour, 25*time.Hour }, phases.Config{}, "COMPLETER_MIN_AGE"},
		{"CompleterMinAgeWithinTheReapMargin", func(cfg *Config) { cfg.ReapAfter, cfg.CompleterMinAge = 26*time.Hour, 25*time.Hour-time.Minute }, phases.Config{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadConfig(func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			if tt.modify != nil {
				tt.modify(cfg)
			}
			errs := checkRules(cfg, tt.executor.WithDefaults())
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Fatalf("want no rule broken, got %q", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.Contains(errs[0], tt.want)):
				t.Fatalf("want one error naming %q, got %q", tt.want, errs)
			}
		})
	}
}
