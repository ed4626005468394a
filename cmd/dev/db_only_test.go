package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestDevDatabaseOnly runs dev -db-only as the Procfile steps of docs/operations.md do, under
// `foreman run`: with .env's DATABASE_URL (and its PORT, which counts only when DATABASE_URL is unset). It must print
// that URL, serve a migrated database there, stop on Ctrl-C leaving none of its processes, and
// find its data again on the next run.
func TestDevDatabaseOnly(t *testing.T) {
	t.Parallel()
	dev := proctest.Build(t, "dev")
	dataDir := filepath.Join(reachableTempDir(t), "state")
	databaseURL := fmt.Sprintf("postgres://postgres@localhost:%d/rides_here?sslmode=disable", proctest.FreePort(t))
	ctx := context.Background()

	for run := 1; run <= 2; run++ {
		p := proctest.Start(t, dev, []string{"DATABASE_URL=" + databaseURL, "PORT=5004"}, "-db-only", "-data-dir", dataDir)
		if line := proctest.WaitOutput(t, p, "DATABASE_URL=", 2*time.Minute); line != "DATABASE_URL="+databaseURL {
			t.Fatalf("run %d: want the line DATABASE_URL=%s, got %q", run, databaseURL, line)
		}

		conn, err := pgx.Connect(ctx, databaseURL)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		var rides, jobs int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM rides), (SELECT count(*) FROM river_job)`).Scan(&rides, &jobs); err != nil {
			t.Fatalf("run %d: want a migrated database, River's tables included: %v", run, err)
		}
		if run == 1 {
			if _, err := conn.Exec(ctx, `CREATE TABLE kept_between_runs ()`); err != nil {
				t.Fatal(err)
			}
		} else if _, err := conn.Exec(ctx, `SELECT FROM kept_between_runs`); err != nil {
			t.Fatalf("want the first run's data kept: %v", err)
		}
		conn.Close(ctx)

		procs := proctest.Descendants(t, p.Pid())
		proctest.CheckRunsAll(t, procs, "postgres")
		if err := p.SignalGroup(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("run %d: want exit 0 after Ctrl-C, got %d\n%s", run, code, p.Output())
		}
		proctest.CheckNoneRunning(t, procs)
	}
}

// TestPortInUse: dev, and dev -db-only, started where another process listens exit at once
// with one line that names the setting to change.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	dev := proctest.Build(t, "dev")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"Dev", []string{fmt.Sprintf("PORT=%d", port)}, nil, "is in use by another process: set PORT to a free port"},
		{"DBOnly", []string{fmt.Sprintf("DATABASE_URL=postgres://postgres@localhost:%d/rocketrides", port)},
			[]string{"-db-only", "-data-dir", t.TempDir()}, fmt.Sprintf("DATABASE_URL: port %d is in use by another process: move every port with PORT", port)},
	} {
		_, errOut, code := proctest.Run(t, dev, c.env, c.args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s: want exit 1 with one line saying %q, got %d: %s", c.name, c.want, code, errOut)
		}
	}
}

func TestDBOnlyTarget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, url string
		port      int
		dbName    string
		err       string
	}{
		{"UnsetIsEnvExamples", "", 5605, "rocketrides", ""},
		{"PortAndName", "postgres://postgres@localhost:6000/other?sslmode=disable", 6000, "other", ""},
		{"NoPortIsPostgressOwn", "postgresql://postgres@127.0.0.1/rocketrides", 5432, "rocketrides", ""},
		{"AnotherHost", "postgres://postgres@db.example.com:5432/rocketrides", 0, "", `names host "db.example.com"`},
		{"AnotherUser", "postgres://app@localhost:5433/rocketrides", 0, "", `names user "app"`},
		{"NoDatabase", "postgres://postgres@localhost:5433", 0, "", "names no database"},
		{"NotAURL", "host=localhost port=5433", 0, "", "not a postgres:// URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			port, dbName, err := dbOnlyTarget(c.url, api.PortDefault, false)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want an error saying %q, got %v", c.err, err)
				}
				return
			}
			if err != nil || port != c.port || dbName != c.dbName {
				t.Fatalf("got port %d, database %q, %v; want %d, %q", port, dbName, err, c.port, c.dbName)
			}
		})
	}
}

// TestStateDirOfAnEarlierDev checks that a data directory that an earlier dev used as the
// cluster itself is refused with what to do, rather than a second cluster made inside it.
func TestStateDirOfAnEarlierDev(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := stateDir(dir).check(); err != nil {
		t.Fatalf("want an empty directory taken, got %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := stateDir(dir).check()
	if want := filepath.Join(dir, "postgres"); err == nil || !strings.Contains(err.Error(), "move it there") || !strings.Contains(err.Error(), want) {
		t.Fatalf("want an error saying to move the database to %s, got %v", want, err)
	}
}
