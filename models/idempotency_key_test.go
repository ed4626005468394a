package models

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitizeErrorText(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, in, want string
	}{
		{"Plain", "payment processor unavailable: EOF", "payment processor unavailable: EOF"},
		{"NUL", "bad\x00byte", "badbyte"},
		{"InvalidUTF8", "cut in half: \xc3", "cut in half: \uFFFD"},
		{"LongIsTruncated", strings.Repeat("é", 2500), strings.Repeat("é", 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := SanitizeErrorText(tt.in)
			if got != tt.want || !utf8.ValidString(got) {
				t.Fatalf("want %q, got %q", tt.want, got)
			}
		})
	}
}
