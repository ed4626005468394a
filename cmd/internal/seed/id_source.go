package seed

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/models"
)

// idSource makes the ids of new keys, rides and audit records the way the schema at hand
// would. Since migration 00006 they are random 63-bit numbers, which models.NewID draws as the
// column default random_id() does. On the article's schema (up to 00005) each comes from its
// table's sequence, and history seeded there must look like the article's too: ids 1, 2, 3 and
// so on, after those already taken, with the sequences moved past them so that the next
// request's insert does not collide.
type idSource struct {
	sequential bool
	keys       tableIDs
	rides      tableIDs
	audits     tableIDs
}

// tableIDs hands out the ids of one table.
type tableIDs struct {
	table    string
	sequence string // of the id column on the article's schema; empty when ids are random
	prior    int64  // the largest id in the table before the seed, on the article's schema
	last     int64  // the last id handed out, on the article's schema
}

func (t *tableIDs) next() int64 {
	if t.sequence == "" {
		return models.NewID()
	}
	t.last++
	return t.last
}

// newIDSource finds out how the schema makes ids. On the article's schema it also locks the
// three tables against writes until the transaction ends: a request inserting meanwhile would
// take from the sequence an id that the seed writes too.
func newIDSource(ctx context.Context, tx pgx.Tx) (*idSource, error) {
	s := &idSource{
		keys:   tableIDs{table: "idempotency_keys"},
		rides:  tableIDs{table: "rides"},
		audits: tableIDs{table: "audit_records"},
	}
	tables := []*tableIDs{&s.keys, &s.rides, &s.audits}

	sequences := 0
	for _, t := range tables {
		// pg_get_serial_sequence names the sequence that a bigserial column owns, and is NULL
		// once migration 00006 has dropped it for random_id().
		var sequence *string
		if err := tx.QueryRow(ctx, "SELECT pg_get_serial_sequence($1, 'id')", t.table).Scan(&sequence); err != nil {
			return nil, fmt.Errorf("error finding the id sequence of %s: %w", t.table, err)
		}
		if sequence != nil {
			t.sequence = *sequence
			sequences++
		}
	}
	switch sequences {
	case 0:
		return s, nil
	case len(tables):
		s.sequential = true
	default:
		// No migration leaves the schema so; guessing could write ids that collide later.
		return nil, errors.New("some of idempotency_keys, rides and audit_records have id sequences and some do not: an unknown schema")
	}

	if _, err := tx.Exec(ctx, "LOCK TABLE idempotency_keys, rides, audit_records IN EXCLUSIVE MODE"); err != nil {
		return nil, fmt.Errorf("error locking tables for sequential ids: %w", err)
	}
	for _, t := range tables {
		err := tx.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM "+pgx.Identifier{t.table}.Sanitize()).Scan(&t.prior)
		if err != nil {
			return nil, fmt.Errorf("error finding the largest id of %s: %w", t.table, err)
		}
		t.last = t.prior
	}
	return s, nil
}

// advanceSequences moves each sequence to the last id handed out, so that the next nextval
// continues after it. Sequences ignore transactions: should the seed roll back after this,
// some values are skipped, which is harmless.
func (s *idSource) advanceSequences(ctx context.Context, tx pgx.Tx) error {
	if !s.sequential {
		return nil
	}
	for _, t := range []*tableIDs{&s.keys, &s.rides, &s.audits} {
		if t.last == t.prior {
			continue // nothing seeded here: the sequence is where it was
		}
		if _, err := tx.Exec(ctx, "SELECT setval($1::regclass, $2)", t.sequence, t.last); err != nil {
			return fmt.Errorf("error advancing sequence %s: %w", t.sequence, err)
		}
	}
	return nil
}
