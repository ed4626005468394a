package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/rocketrides/rocketrides/migrations"
)

// runDatabaseOnly is dev -db-only: PostgreSQL alone, migrated and kept in dir, for the processes
// that a Procfile manager runs. It listens where databaseURL (DATABASE_URL, .env's under
// `foreman run`) says, so that .env names one database for every command, and runs until ctx
// ends. DATABASE_URL unset, it listens where .env's would say, from basePort (PORT).
func runDatabaseOnly(ctx context.Context, dir stateDir, databaseURL string, basePort int, ha bool, stdout io.Writer, logf func(string, ...any)) error {
	port, dbName, err := dbOnlyTarget(databaseURL, basePort, ha)
	if err != nil {
		return err
	}
	if err := portsFree(port, ha); err != nil {
		return err
	}
	if err := dir.check(); err != nil {
		return err
	}
	db, err := startDatabase(ctx, dir, ha, port, dbName, logf)
	if err != nil {
		return err
	}
	defer func() {
		logf("Stopping PostgreSQL")
		_ = db.stop(context.WithoutCancel(ctx))
	}()
	url := db.url
	logf("Migrating")
	if err := migrations.Up(ctx, url); err != nil {
		return err
	}
	where := dir.Postgres()
	if ha {
		where = dir.HA() + " (a monitor, a primary and its synchronous standby; the monitor at " + db.monitorURL + ")"
	}

	fmt.Fprintf(stdout, `
PostgreSQL is running, migrated, with its data in %[1]s.

DATABASE_URL=%[2]s

The Procfile's processes find it through that line of .env, as .env.example writes it; in a
shell, export DATABASE_URL='%[2]s'. Ctrl-C stops it, and the data stays for the next run.

`, where, url)
	<-ctx.Done()
	logf("Stopping")
	return nil
}

// portsFree fails with one line naming what to change if another process holds the database's
// port (with ha, the monitor's or a node's, port and the two after it).
func portsFree(port int, ha bool) error {
	ports := []int{port}
	if ha {
		ports = []int{port, port + 1, port + 2}
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("localhost", strconv.Itoa(p)))
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("DATABASE_URL: port %d is in use by another process: move every port with PORT (PORT=6004 bin/dev -env > .env), or name other ports in DATABASE_URL", p)
		}
		if err != nil {
			return fmt.Errorf("error checking port %d: %w", p, err)
		}
		l.Close()
	}
	return nil
}
