// Package authtoken makes and checks riders' API tokens. A token is 256 random bits and a MAC of
// them under the API's token secret; the database keeps only the token's SHA-256, so a leaked
// table authenticates nobody. A fast hash is enough here (unlike for passwords) because the
// token's entropy, not the hash's cost, is what stops guessing.
//
// The MAC lets the API refuse a token it never issued without asking the database: a flood of
// made-up tokens costs a hash each, and no lookup that a valid rider would have to wait for. It
// authenticates nobody on its own (the lookup does), so its secret leaking lets a flood reach
// the database again, not anyone in.
package authtoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// prefix marks our tokens so that they are recognisable in logs and by secret scanners.
const prefix = "rr_"

// randomBytes and macBytes are a token's parts: 256 random bits, and 128 bits of MAC, which a
// forger must guess whole.
const (
	randomBytes = 32
	macBytes    = 16
)

// SecretMinBytes is the shortest secret a Key accepts: as many bytes as the token's random part.
const SecretMinBytes = 32

// ErrSecretTooShort is ParseKey's answer to a secret under SecretMinBytes.
var ErrSecretTooShort = fmt.Errorf("the token secret must be at least %d bytes, such as the output of `openssl rand -base64 32`", SecretMinBytes)

// Key makes and checks tokens' MACs. The zero Key is not usable; make one with ParseKey.
type Key struct{ secret []byte }

// ParseKey returns the key of secret, which must be at least SecretMinBytes long.
func ParseKey(secret string) (Key, error) {
	if len(secret) < SecretMinBytes {
		return Key{}, ErrSecretTooShort
	}
	return Key{secret: []byte(secret)}, nil
}

// New returns a fresh token and the hash to store for it.
func (k Key) New() (token string, hash []byte, err error) {
	if k.secret == nil {
		return "", nil, errors.New("error making a token: no token secret")
	}
	b := make([]byte, randomBytes, randomBytes+macBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("error reading random bytes: %w", err)
	}
	token = prefix + base64.RawURLEncoding.EncodeToString(append(b, k.mac(b)...))
	return token, Hash(token), nil
}

// Issued reports whether token carries a valid MAC under k: whether k's holder issued it. Only
// such a token is worth looking up.
func (k Key) Issued(token string) bool {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok || k.secret == nil || base64.RawURLEncoding.DecodedLen(len(rest)) != randomBytes+macBytes {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(b) != randomBytes+macBytes {
		return false
	}
	return hmac.Equal(b[randomBytes:], k.mac(b[:randomBytes]))
}

func (k Key) mac(random []byte) []byte {
	h := hmac.New(sha256.New, k.secret)
	h.Write([]byte("rocketrides api token\x00"))
	h.Write(random)
	return h.Sum(nil)[:macBytes]
}

// Hash is what the database stores and looks tokens up by.
func Hash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
