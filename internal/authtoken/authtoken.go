// Package authtoken makes and checks riders' API tokens. A token is 256 random bits; the
// database keeps only its SHA-256, so a leaked table authenticates nobody. A fast hash is enough
// here (unlike for passwords) because the token's entropy, not the hash's cost, is what stops
// guessing.
package authtoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// prefix marks our tokens so that they are recognisable in logs and by secret scanners.
const prefix = "rr_"

// New returns a fresh token and the hash to store for it.
func New() (token string, hash []byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("error reading random bytes: %w", err)
	}
	token = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, Hash(token), nil
}

// Hash is what the database stores and looks tokens up by.
func Hash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
