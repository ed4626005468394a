package main

import (
	"context"
	"fmt"
	"io"

	"github.com/rocketrides/rocketrides/migrations"
)

// runDatabaseOnly is dev -db-only: PostgreSQL alone, migrated and kept in dir, for the processes
// that a Procfile manager runs. It listens where databaseURL (DATABASE_URL, .env's under
// `foreman run`) says, so that .env names one database for every command, and runs until ctx
// ends.
func runDatabaseOnly(ctx context.Context, dir stateDir, databaseURL string, stdout io.Writer, logf func(string, ...any)) error {
	port, dbName, err := dbOnlyTarget(databaseURL)
	if err != nil {
		return err
	}
	if err := dir.check(); err != nil {
		return err
	}
	cluster, url, err := startDatabase(ctx, dir.Postgres(), port, dbName, logf)
	if err != nil {
		return err
	}
	defer func() {
		logf("Stopping PostgreSQL")
		_ = cluster.Stop(context.WithoutCancel(ctx))
	}()
	logf("Migrating")
	if err := migrations.Up(ctx, url); err != nil {
		return err
	}

	fmt.Fprintf(stdout, `
PostgreSQL is running, migrated, with its data in %[1]s.

DATABASE_URL=%[2]s

The Procfile's processes find it through that line of .env, as .env.example writes it; in a
shell, export DATABASE_URL='%[2]s'. Ctrl-C stops it, and the data stays for the next run.

`, dir.Postgres(), url)
	<-ctx.Done()
	logf("Stopping")
	return nil
}
