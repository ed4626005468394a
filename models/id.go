package models

import (
	"crypto/rand"
	"encoding/binary"
)

// NewID returns a random positive 63-bit identifier for a new row of a table that the ride
// phases read and write under SERIALIZABLE (see migrations/00006_random_ids.sql for why they
// must not be sequential). The application makes ids itself rather than taking the column
// default, so that a ride and the rows pointing at it can be sent to Postgres in one round
// trip. Collisions are as good as impossible: two ids among a billion rows collide with odds of
// about one in ten billion, and the primary key would refuse the second one anyway.
func NewID() int64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails; see crypto/rand.Read
		if id := int64(binary.BigEndian.Uint64(b[:]) >> 1); id != 0 {
			return id
		}
	}
}
