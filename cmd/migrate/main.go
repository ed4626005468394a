// Command migrate applies, rolls back and lists the migrations of the database DATABASE_URL
// names:
//
//	DATABASE_URL=postgres://localhost/rocketrides go run ./cmd/migrate up|down|status
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"

	"github.com/rocketrides/rocketrides/migrations"
)

const usage = `usage: migrate up|down|status

  up      apply every pending migration, River's included
  down    roll back the latest applied migration
  status  list each migration, its source and whether it is applied

The database is the one DATABASE_URL names.
`

// connectWait is how long to wait for a database that is not reachable yet: one started
// alongside this command (a Procfile, a CI service) takes a few seconds to accept connections.
const connectWait = 10 * time.Second

// errUsage is returned for a command line that names no known command.
var errUsage = errors.New("expected exactly one command: up, down or status")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv("DATABASE_URL"), os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "migrate: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, databaseURL string, out io.Writer) error {
	if len(args) != 1 || (args[0] != "up" && args[0] != "down" && args[0] != "status") {
		return errUsage
	}
	if databaseURL == "" {
		return errors.New("DATABASE_URL is not set")
	}

	db, err := migrations.Open(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := waitForDatabase(ctx, db.PingContext); err != nil {
		return err
	}
	provider, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}

	switch args[0] {
	case "up":
		return upWhileReachable(ctx, db, provider, out)
	case "down":
		return down(ctx, provider, out)
	default:
		return status(ctx, provider, out)
	}
}

// waitForDatabase pings until the database answers, for up to connectWait. A server that
// answers with an error (a wrong password, a database that does not exist) is not waited for:
// retrying would not change its answer.
func waitForDatabase(ctx context.Context, ping func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	for {
		err := ping(ctx)
		if err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		// 57P03: the database system is starting up.
		if errors.As(err, &pgErr) && pgErr.Code != "57P03" {
			return fmt.Errorf("error connecting to database: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database not reachable after %s: %w", connectWait, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// upTries is how many times up runs when the database stops taking connections under it. A highly
// available database that is still settling (a node restarting, the other one read-only) can
// refuse a connection moments after waitForDatabase saw it answer; a migration cut off so is
// rolled back, or written to be run again.
const upTries = 3

// upWhileReachable runs up, and again after waitForDatabase when the database stopped taking
// connections under it, up to upTries times.
func upWhileReachable(ctx context.Context, db *sql.DB, provider *goose.Provider, out io.Writer) error {
	for try := 1; ; try++ {
		err := up(ctx, db, provider, out)
		if err == nil || try == upTries || !lostDatabase(err) {
			return err
		}
		fmt.Fprintf(out, "the database stopped taking connections, waiting for it: %v\n", err)
		if err := waitForDatabase(ctx, db.PingContext); err != nil {
			return err
		}
	}
}

// lostDatabase reports whether err says that the database took no connection, or lost one: a
// failed connect (a node starting or stopping, or read-only where read-write was asked for), a
// server shutting down (SQLSTATE class 57), or a connection that broke under a statement.
func lostDatabase(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "57")
}

// up applies the pending goose migrations, then the River migrations that the linked River
// knows and the database lacks (migrations.RiverUp): those of a River upgrade, which goose does
// not see; and on a Citus coordinator lays the tables out (migrations.CitusUp).
//
// Each step that times out on a lock (migrations.LockTimeout) is tried again, a few times, and
// then fails naming the sessions that held it up (migrations.RetryLockTimeouts).
func up(ctx context.Context, db *sql.DB, provider *goose.Provider, out io.Writer) error {
	var results []*goose.MigrationResult
	err := migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) error {
		applied, err := provider.Up(ctx)
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			applied = partial.Applied
		}
		for _, result := range applied {
			fmt.Fprintln(out, result)
		}
		results = append(results, applied...)
		if err != nil && migrations.IsLockTimeout(err) {
			fmt.Fprintf(out, "a migration gave up waiting %s for a lock\n", migrations.LockTimeout)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("error migrating up: %w", err)
	}
	var riverVersions []int
	err = migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) (err error) {
		riverVersions, err = migrations.RiverUp(ctx, db)
		return err
	})
	if err != nil {
		return fmt.Errorf("error migrating up: %w", err)
	}
	for _, v := range riverVersions {
		fmt.Fprintf(out, "OK    up River migration %d\n", v)
	}
	var distributed []string
	err = migrations.RetryLockTimeouts(ctx, db, func(ctx context.Context) (err error) {
		distributed, err = migrations.CitusUp(ctx, db)
		return err
	})
	if err != nil {
		return fmt.Errorf("error migrating up: %w", err)
	}
	for _, table := range distributed {
		fmt.Fprintf(out, "OK    laid out %s for Citus\n", table)
	}
	if len(results) == 0 && len(riverVersions) == 0 && len(distributed) == 0 {
		version, err := provider.GetDBVersion(ctx)
		if err != nil {
			return fmt.Errorf("error getting database version: %w", err)
		}
		fmt.Fprintf(out, "nothing to apply: the database is at version %d\n", version)
	}
	return nil
}

func down(ctx context.Context, provider *goose.Provider, out io.Writer) error {
	result, err := provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		fmt.Fprintln(out, "nothing to roll back: no migration is applied")
		return nil
	}
	if err != nil {
		return fmt.Errorf("error migrating down: %w", err)
	}
	fmt.Fprintln(out, result)
	return nil
}

func status(ctx context.Context, provider *goose.Provider, out io.Writer) error {
	statuses, err := provider.Status(ctx)
	if err != nil {
		return fmt.Errorf("error getting migration status: %w", err)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tSOURCE\tSTATE\tAPPLIED AT")
	for _, s := range statuses {
		appliedAt := ""
		if s.State == goose.StateApplied {
			appliedAt = s.AppliedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Source.Version, s.Source.Path, s.State, appliedAt)
	}
	return w.Flush()
}
