package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// IndexBuildLockTimeout bounds the wait of dropInvalidIndexes for a build in progress on the
// index's table (or a VACUUM), as long as a second migrate up waits for the first's turn
// (lockPollAttempts seconds). It polls, once a second, without holding anything in between.
const (
	IndexBuildLockTimeout = 5 * time.Minute
	buildPollInterval     = time.Second
)

// concurrentIndex matches a migration's statement that builds an index concurrently, and
// captures the index's name.
var concurrentIndex = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+([a-z_][a-z0-9_]*)`)

// concurrentIndexNames returns the names of the indexes that the migrations build concurrently,
// read off the embedded SQL.
var concurrentIndexNames = sync.OnceValues(func() ([]string, error) {
	paths, err := fs.Glob(sqlMigrations, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("error listing migrations: %w", err)
	}
	var names []string
	for _, path := range paths {
		text, err := fs.ReadFile(sqlMigrations, path)
		if err != nil {
			return nil, fmt.Errorf("error reading migration %s: %w", path, err)
		}
		for _, m := range concurrentIndex.FindAllSubmatch(text, -1) {
			names = append(names, strings.ToLower(string(m[1])))
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
})

// dropInvalidIndexes drops the indexes that one of our migrations' CREATE INDEX CONCURRENTLY
// left invalid when it failed (a lock timeout, here): that migration's IF NOT EXISTS would take
// such an index for done, and it would stay, never used and always written. Only those indexes,
// in the migrations' schema, are dropped: any other invalid index is someone else's, perhaps
// still being built.
func dropInvalidIndexes(ctx context.Context, db *sql.DB) error {
	names, err := concurrentIndexNames()
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, `
		SELECT format('%I.%I', n.nspname, c.relname), format('%I.%I', n.nspname, t.relname)
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_class t ON t.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT i.indisvalid AND n.nspname = current_schema() AND c.relname = ANY($1)`, names)
	if err != nil {
		return fmt.Errorf("error looking for indexes left invalid: %w", err)
	}
	type invalid struct{ index, table string }
	var found []invalid
	for rows.Next() {
		var f invalid
		if err := rows.Scan(&f.index, &f.table); err != nil {
			_ = rows.Close()
			return fmt.Errorf("error looking for indexes left invalid: %w", err)
		}
		found = append(found, f)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error looking for indexes left invalid: %w", err)
	}
	for _, f := range found {
		if err := dropInvalidIndex(ctx, db, f.index, f.table); err != nil {
			return err
		}
	}
	return nil
}

// dropInvalidIndex drops index unless it is valid once no build runs on table. SHARE UPDATE
// EXCLUSIVE conflicts with CREATE INDEX CONCURRENTLY's own lock, so once it is held a build in
// progress has ended, and the index is checked again: a build that finished made it valid.
//
// The lock is asked for without waiting, again every buildPollInterval: a transaction waiting
// for it would deadlock with the build, which in turn waits for every older transaction.
func dropInvalidIndex(ctx context.Context, db *sql.DB, index, table string) error {
	deadline := time.Now().Add(IndexBuildLockTimeout)
	for {
		err := dropInvalidIndexNoWait(ctx, db, index, table)
		if !IsLockTimeout(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("error waiting for a build of index %s: %w", index, ctx.Err())
		case <-time.After(buildPollInterval):
		}
	}
}

func dropInvalidIndexNoWait(ctx context.Context, db *sql.DB, index, table string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("error dropping index %s, left invalid: %w", index, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE `+table+` IN SHARE UPDATE EXCLUSIVE MODE NOWAIT`); err != nil {
		return fmt.Errorf("error dropping index %s, left invalid: %w", index, err)
	}
	var stillInvalid bool
	err = tx.QueryRowContext(ctx, `SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, index).Scan(&stillInvalid)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !stillInvalid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error checking index %s, left invalid: %w", index, err)
	}
	// DROP INDEX takes ACCESS EXCLUSIVE, which rides queue behind: LockTimeout bounds its wait.
	if _, err := tx.ExecContext(ctx, `DROP INDEX `+index); err != nil {
		return fmt.Errorf("error dropping index %s, left invalid: %w", index, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("error dropping index %s, left invalid: %w", index, err)
	}
	return nil
}
