package api

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// structuredString is RFC 8941's sf-string (section 3.3.3) as a regular expression, written
// apart from unquoteStructuredString so that each checks the other.
var structuredString = regexp.MustCompile(`^"([\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"$`)

// idempotencyKeySeeds are header values at the edges of the Idempotency-Key syntax, for the fuzz
// tests that check it.
var idempotencyKeySeeds = []string{
	"8e03978e-40d5-43e8-bc93-6894a57f9324",
	`"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
	`"a \"quoted\" and a \\ key, long enough"`,
	`"8e03978e-40d5-43e8-bc93-6894a57f9324";v=1`,
	`"8e03978e-40d5-43e8-bc93-6894a57f9324`,
	`"8e03978e-40d5-43e8-bc93-6894a57f9324\`,
	`"8e03978e-40d5-43e8-bc93-6894a57f9324\n"`,
	`key with a " inside, long enough`,
	strings.Repeat("a", 19),
	strings.Repeat("a", 20),
	strings.Repeat("a", 255),
	`"` + strings.Repeat("a", 255) + `"`,
	"aaaaaaaaaaaaaaaaaaaa\t",
	"ééééééééééééééééééééé",
	"",
	`"`,
	`""`,
}

// FuzzIdempotencyKey feeds the Idempotency-Key parser any header value. A valid key passes and
// an invalid one never does: what it accepts is 20 to 255 printable ASCII characters, the
// value itself when bare, or what a well-formed RFC 8941 string spells when quoted; quoting an
// accepted key gives the same key back; a value with any byte outside printable ASCII is never
// accepted; and the header sent twice is always refused.
func FuzzIdempotencyKey(f *testing.F) {
	for _, seed := range idempotencyKeySeeds {
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, value string) {
		key, apiErr := parseIdempotencyKey(value)

		quoted := strings.HasPrefix(value, `"`)
		printable := true
		for i := 0; i < len(value); i++ {
			printable = printable && value[i] >= 0x20 && value[i] <= 0x7e
		}
		switch {
		case apiErr != nil:
			if apiErr.problem.Status != http.StatusBadRequest || apiErr.problem.Code != problem.CodeIdempotencyKeyInvalid || apiErr.problem.Detail == "" {
				t.Fatalf("%q: want a 400 idempotency_key_invalid that says why, got %+v", value, apiErr.problem)
			}
			// Refused only for a reason: a wrong length, a byte outside printable ASCII, or a
			// malformed quoted string.
			if printable && (!quoted || structuredString.MatchString(value)) {
				unquoted := value
				if quoted {
					unquoted, _ = unquoteStructuredString(value)
				}
				if len(unquoted) >= idempotencyKeyMinLen && len(unquoted) <= idempotencyKeyMaxLen {
					t.Fatalf("%q: a valid key refused: %s", value, apiErr.problem.Detail)
				}
			}
			return
		case !printable:
			t.Fatalf("%q: accepted a value with a byte outside printable ASCII as %q", value, key)
		case len(key) < idempotencyKeyMinLen || len(key) > idempotencyKeyMaxLen:
			t.Fatalf("%q: accepted a key of %d characters", value, len(key))
		case quoted && !structuredString.MatchString(value):
			t.Fatalf("%q: accepted a malformed quoted string as %q", value, key)
		case !quoted && key != value:
			t.Fatalf("%q: a bare key must be itself, got %q", value, key)
		}

		// The quoted spelling of an accepted key is the same key.
		again, apiErr := parseIdempotencyKey(quoteStructuredString(key))
		if apiErr != nil || again != key {
			t.Fatalf("%q accepted as %q, but quoted as %s it is %q (%v)", value, key, quoteStructuredString(key), again, apiErr)
		}

		header := http.Header{}
		header.Add(idempotencyKeyHeader, value)
		if fromHeader, apiErr := idempotencyKeyFrom(header); apiErr != nil || fromHeader != key {
			t.Fatalf("%q: the header gives %q (%v), the value %q", value, fromHeader, apiErr, key)
		}
		header.Add(idempotencyKeyHeader, value)
		if _, apiErr := idempotencyKeyFrom(header); apiErr == nil || apiErr.problem.Code != problem.CodeDuplicateHeader {
			t.Fatalf("%q sent twice: want duplicate_header, got %v", value, apiErr)
		}
	})
}

// quoteStructuredString writes s, printable ASCII, as an RFC 8941 string.
func quoteStructuredString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
