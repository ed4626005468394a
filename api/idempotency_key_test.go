package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
)

func TestIdempotencyKeyFrom(t *testing.T) {
	t.Parallel()

	const uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	tests := []struct {
		name   string
		values []string // the header's values, in order; nil: no header
		want   string   // the key, when valid
		code   problem.Code
	}{
		{"Missing", nil, "", problem.CodeIdempotencyKeyMissing},
		{"Empty", []string{""}, "", problem.CodeIdempotencyKeyMissing},
		{"TooShort", []string{strings.Repeat("a", 19)}, "", problem.CodeIdempotencyKeyInvalid},
		{"Shortest", []string{strings.Repeat("a", 20)}, strings.Repeat("a", 20), ""},
		{"UUID", []string{uuid}, uuid, ""},
		{"Longest", []string{strings.Repeat("a", 255)}, strings.Repeat("a", 255), ""},
		{"TooLong", []string{strings.Repeat("a", 256)}, "", problem.CodeIdempotencyKeyInvalid},
		{"SpacesAndPunctuation", []string{"key with spaces ~!@#$%^&*()"}, "key with spaces ~!@#$%^&*()", ""},
		{"QuoteInside", []string{`key with a " inside it`}, `key with a " inside it`, ""},
		{"ControlCharacter", []string{"aaaaaaaaaaaaaaaaaaaa\t"}, "", problem.CodeIdempotencyKeyInvalid},
		{"NonASCII", []string{"ééééééééééééééééééééé"}, "", problem.CodeIdempotencyKeyInvalid},

		{"SentTwice", []string{uuid, "0ccb7813-e63d-4377-93c5-476cb93038f3"}, "", problem.CodeDuplicateHeader},
		{"SentTwiceTheSame", []string{uuid, uuid}, "", problem.CodeDuplicateHeader},
		{"SentTwiceOnceEmpty", []string{uuid, ""}, "", problem.CodeDuplicateHeader},

		// The IETF draft's form: an RFC 8941 string, the same key as its bare spelling.
		{"Quoted", []string{`"` + uuid + `"`}, uuid, ""},
		{"QuotedWithEscapes", []string{`"a \"quoted\" and a \\ key"`}, `a "quoted" and a \ key`, ""},
		{"QuotedShortest", []string{`"` + strings.Repeat("a", 20) + `"`}, strings.Repeat("a", 20), ""},
		{"QuotedTooShort", []string{`"` + strings.Repeat("a", 19) + `"`}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedLongest", []string{`"` + strings.Repeat("a", 255) + `"`}, strings.Repeat("a", 255), ""},
		{"QuotedTooLong", []string{`"` + strings.Repeat("a", 256) + `"`}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedUnterminated", []string{`"` + uuid}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedWithParameters", []string{`"` + uuid + `";v=1`}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedTwoStrings", []string{`"` + uuid + `", "` + uuid + `"`}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedBadEscape", []string{`"` + uuid + `\n"`}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedEscapeAtEnd", []string{`"` + uuid + `\`}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuotedControlCharacter", []string{"\"" + uuid + "\t\""}, "", problem.CodeIdempotencyKeyInvalid},
		{"QuoteAlone", []string{`"`}, "", problem.CodeIdempotencyKeyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := http.Header{}
			for _, v := range tt.values {
				header.Add(idempotencyKeyHeader, v)
			}
			key, apiErr := idempotencyKeyFrom(header)
			if tt.code == "" {
				if apiErr != nil {
					t.Fatalf("want %q, got %+v", tt.want, apiErr.problem)
				}
				if key != tt.want {
					t.Fatalf("want key %q, got %q", tt.want, key)
				}
				return
			}
			if apiErr == nil {
				t.Fatalf("want %s, got key %q", tt.code, key)
			}
			if apiErr.problem.Code != tt.code || apiErr.problem.Status != http.StatusBadRequest || apiErr.problem.Detail == "" {
				t.Fatalf("want 400 %s, got %d %s", tt.code, apiErr.problem.Status, apiErr.problem.Code)
			}
		})
	}
}
