package fakestripe

import "math/rand/v2"

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns a Stripe-looking object ID such as "ch_3MmlLrLkdIwHu7ix0snN0B15". IDs only need
// to be unique and recognisable here, not unguessable, so math/rand is enough.
func newID(prefix string) string {
	const n = 24
	b := make([]byte, len(prefix), len(prefix)+n)
	copy(b, prefix)
	for range n {
		b = append(b, idAlphabet[rand.IntN(len(idAlphabet))])
	}
	return string(b)
}
