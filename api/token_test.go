package api_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// TestTokensAreLookedUpBySHA256 stores the SHA-256 of a token, computed here rather than by
// authtoken.Hash, and requires the API to let that token in: a test that hashes its tokens with
// the code under test would pass whatever that code stored.
func TestTokensAreLookedUpBySHA256(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	token, _, err := ridetest.TokenKey.New()
	if err != nil {
		t.Fatal(err)
	}
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

// TestTokensNotIssuedCostNoLookup requires a token the API did not issue to be refused without
// the database: with the users table locked, a lookup would wait, and the answer comes all the
// same. A token of the right shape under another secret, and one in the format of tokens made
// before tokens carried a MAC (256 random bits alone), are both such tokens.
func TestTokensNotIssuedCostNoLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	otherKey, err := authtoken.ParseKey("another-secret-of-at-least-32-bytes-long")
	if err != nil {
		t.Fatal(err)
	}
	forged, hash, err := otherKey.New()
	if err != nil {
		t.Fatal(err)
	}
	// Even a forged token whose hash is stored (a leaked secret's, or an old token) is refused.
	b.Exec(t, `UPDATE users SET api_token_hash = $1 WHERE id = $2`, hash, b.Rider.ID)
	oldFormat := "rr_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))

	unlock := b.lockTable(t, "users")
	defer unlock()
	for _, token := range []string{forged, oldFormat} {
		resp := b.do(t, http.MethodGet, "/rides/1", map[string]string{"Authorization": "Bearer " + token}, "")
		resp.requireProblem(t, http.StatusUnauthorized, problem.CodeUnauthorized)
	}
}
