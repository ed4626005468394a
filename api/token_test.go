package api_test

import (
	"crypto/sha256"
	"net/http"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// TestTokensAreLookedUpBySHA256 stores the SHA-256 of a token the test knows, computed here
// rather than by authtoken.Hash, and requires the API to let that token in: a test that makes
// its tokens and hashes with the code under test would pass whatever that code stored.
func TestTokensAreLookedUpBySHA256(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const token = "rr_a-token-this-test-knows-0123456789abcdefghijk"
	sum := sha256.Sum256([]byte(token))
	b.Exec(t, `UPDATE users SET api_token_hash = $1 WHERE id = $2`, sum[:], b.Rider.ID)

	get := func(token string) *response {
		return b.do(t, http.MethodGet, "/rides/999999", map[string]string{"Authorization": "Bearer " + token}, "")
	}
	// Let in: the ride is not found, rather than the rider.
	get(token).requireProblem(t, http.StatusNotFound, problem.CodeNotFound)
	// The rider's old token no longer matches what is stored.
	get(b.Rider.Token).requireProblem(t, http.StatusUnauthorized, problem.CodeUnauthorized)
}

// TestBearerTakesOneOrMoreSpaces follows RFC 7235, whose credentials are the scheme, one or more
// spaces, and the token.
func TestBearerTakesOneOrMoreSpaces(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, auth := range []string{"Bearer " + b.Rider.Token, "Bearer  " + b.Rider.Token, "bearer    " + b.Rider.Token} {
		resp := b.do(t, http.MethodGet, "/rides/999999", map[string]string{"Authorization": auth}, "")
		resp.requireProblem(t, http.StatusNotFound, problem.CodeNotFound)
	}
}
