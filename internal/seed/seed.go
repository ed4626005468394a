// Package seed is a PLACEHOLDER for the package that fills a database with a history of rides,
// which is being written on another branch. It exists only so that cmd/bench -compare compiles
// on this branch; drop this commit when merging the real package. Seed here does nothing.
package seed

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Options say how much history to make. PLACEHOLDER: the real package defines them.
type Options struct {
	Rides  int
	Riders int
}

// Result says what was made. PLACEHOLDER: the real package defines it.
type Result struct{}

// Seed is a PLACEHOLDER that writes nothing and reports nothing.
func Seed(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Result, error) {
	return &Result{}, nil
}
