package authtoken_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/authtoken"
)

func TestKey(t *testing.T) {
	t.Parallel()
	key, err := authtoken.ParseKey(strings.Repeat("k", authtoken.SecretMinBytes))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := authtoken.ParseKey(strings.Repeat("o", authtoken.SecretMinBytes))
	token, hash, err := key.New()
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(token)); string(hash) != string(sum[:]) {
		t.Fatal("want the hash to store the token's SHA-256")
	}
	second, _, _ := key.New()
	if second == token {
		t.Fatal("want every token new")
	}
	if !key.Issued(token) {
		t.Fatalf("want %q issued by its key", token)
	}

	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, "rr_"))
	flipped := append([]byte(nil), raw...)
	flipped[0] ^= 1
	for name, forged := range map[string]string{
		"AnotherKeys":   func() string { t, _, _ := other.New(); return t }(),
		"RandomFlipped": "rr_" + base64.RawURLEncoding.EncodeToString(flipped),
		"Truncated":     token[:len(token)-1],
		"NoPrefix":      strings.TrimPrefix(token, "rr_"),
		"WithoutMAC":    "rr_" + base64.RawURLEncoding.EncodeToString(raw[:32]),
		"NotBase64":     "rr_" + strings.Repeat("!", len(token)-3),
		"Empty":         "",
	} {
		if key.Issued(forged) {
			t.Errorf("%s: want %q refused", name, forged)
		}
	}
	if _, err := authtoken.ParseKey(strings.Repeat("k", authtoken.SecretMinBytes-1)); !errors.Is(err, authtoken.ErrSecretTooShort) {
		t.Fatalf("want a short secret refused, got %v", err)
	}
	if _, _, err := (authtoken.Key{}).New(); err == nil {
		t.Fatal("want the zero key to make no token")
	}
}
