package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// idempotencyKeyHeader is the header a ride request names its key in.
const idempotencyKeyHeader = "Idempotency-Key"

// Idempotency-Key bounds. 20 characters is the least that still leaves room for real
// randomness (a UUID is 36); 255 is what the column holds.
const (
	idempotencyKeyMinLen = 20
	idempotencyKeyMaxLen = 255
)

// idempotencyKeyFrom reads a request's Idempotency-Key, sent once, bare as Stripe has it
// (Idempotency-Key: 8e03978e-...) or quoted as the IETF draft has it, an RFC 8941 string
// (Idempotency-Key: "8e03978e-..."). The two spellings are the same key: the draft's quotes are
// syntax around the key, not part of it, so a client that moves from one to the other keeps
// its keys.
func idempotencyKeyFrom(header http.Header) (string, *apiError) {
	values := header.Values(idempotencyKeyHeader)
	switch {
	case len(values) > 1:
		return "", errDuplicateHeader(idempotencyKeyHeader)
	case len(values) == 0 || values[0] == "":
		return "", newError(http.StatusBadRequest, problem.CodeIdempotencyKeyMissing, "Idempotency key missing",
			"Send an Idempotency-Key header (a UUID is a good choice) and keep it for every retry of this request.")
	}
	return parseIdempotencyKey(values[0])
}

// parseIdempotencyKey returns the key a header value spells: the value itself, or, for a value
// that starts with a quote, the RFC 8941 string it must then be, unescaped. A value that starts
// with a quote and is not such a string is refused rather than taken as it stands, since its
// sender evidently meant the quoted form and got it wrong.
func parseIdempotencyKey(value string) (string, *apiError) {
	key := value
	if strings.HasPrefix(value, `"`) {
		var ok bool
		if key, ok = unquoteStructuredString(value); !ok {
			return "", errIdempotencyKeyInvalid(`A quoted Idempotency-Key must be one RFC 8941 string: printable ASCII in double quotes, with " and \ escaped by a backslash, and nothing after the closing quote.`)
		}
	}
	if len(key) < idempotencyKeyMinLen || len(key) > idempotencyKeyMaxLen {
		return "", errIdempotencyKeyInvalid(fmt.Sprintf("Idempotency-Key must be %d to %d characters long; it is %d.",
			idempotencyKeyMinLen, idempotencyKeyMaxLen, len(key)))
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", errIdempotencyKeyInvalid("Idempotency-Key may contain only printable ASCII characters.")
	}
	return key, nil
}

// unquoteStructuredString decodes an RFC 8941 sf-string (section 3.3.3) that is the whole of s:
// printable ASCII between double quotes, where a backslash may only escape a quote or another
// backslash. s starts with the opening quote; the callers check that first.
func unquoteStructuredString(s string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), i == len(s)-1
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}

func errIdempotencyKeyInvalid(detail string) *apiError {
	return newError(http.StatusBadRequest, problem.CodeIdempotencyKeyInvalid, "Idempotency key invalid", detail)
}

// errDuplicateHeader refuses a request that sent name more than once. Go's server keeps every
// copy, and taking the first (as Header.Get does) would act on a value that a proxy or the
// client may not have meant: which one counts is exactly what a smuggling attack plays on.
func errDuplicateHeader(name string) *apiError {
	return newError(http.StatusBadRequest, problem.CodeDuplicateHeader, "Duplicate header",
		fmt.Sprintf("The %s header was sent more than once; send it once.", name))
}
