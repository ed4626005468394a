package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestCluster(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	cluster := startCluster(t, Config{})

	conn := connect(t, cluster.URL("postgres"))
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatalf("error querying: %v", err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %q, want off: the throwaway settings were not applied", fsync)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE survivors (name text); INSERT INTO survivors VALUES ('ride')"); err != nil {
		t.Fatalf("error writing: %v", err)
	}

	t.Run("CreateDatabaseOnceAndAgain", func(t *testing.T) {
		for range 2 { // the second finds it there, as a kept data directory's next run does
			if err := cluster.CreateDatabase(ctx, "rides-db"); err != nil {
				t.Fatalf("error creating database: %v", err)
			}
		}
		var name string
		if err := connect(t, cluster.URL("rides-db")).QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil || name != "rides-db" {
			t.Fatalf("want to be connected to rides-db, got %q (%v)", name, err)
		}
	})

	t.Run("RestartKeepsDataAndURL", func(t *testing.T) {
		if err := cluster.StopServer(ctx); err != nil {
			t.Fatalf("error stopping server: %v", err)
		}
		if c, err := pgx.Connect(ctx, cluster.URL("postgres")); err == nil {
			c.Close(ctx)
			t.Fatal("connected to a stopped server")
		}

		if err := cluster.StartServer(ctx); err != nil {
			t.Fatalf("error starting server again: %v", err)
		}
		var name string
		if err := connect(t, cluster.URL("postgres")).QueryRow(ctx, "SELECT name FROM survivors").Scan(&name); err != nil {
			t.Fatalf("error reading after restart: %v", err)
		}
		if name != "ride" {
			t.Errorf("name = %q after restart, want ride", name)
		}
	})

	t.Run("StopRemovesTemporaryData", func(t *testing.T) {
		if err := cluster.Stop(ctx); err != nil {
			t.Fatalf("error stopping: %v", err)
		}
		if _, err := os.Stat(cluster.DataDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("data directory still there after Stop (stat: %v)", err)
		}
	})
}

func TestClusterPersistentDataDir(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	// Not t.TempDir: its parent is private to root, and the server may run as another user.
	parent, err := os.MkdirTemp("", "rrpgtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(parent, "pgdata")

	first := startCluster(t, Config{DataDir: dataDir})
	if _, err := connect(t, first.URL("postgres")).Exec(ctx, "CREATE DATABASE kept"); err != nil {
		t.Fatalf("error creating database: %v", err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("error stopping: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		t.Fatalf("Stop removed a data directory it did not create: %v", err)
	}

	second := startCluster(t, Config{DataDir: dataDir})
	// Connecting proves the database survived: pgx fails on a database that does not exist.
	connect(t, second.URL("kept"))
}

func TestClusterTCPPort(t *testing.T) {
	t.Parallel()

	port := proctest.FreePort(t)
	cluster := startCluster(t, Config{Port: port})
	if want := fmt.Sprintf("@localhost:%d/", port); !strings.Contains(cluster.URL("postgres"), want) {
		t.Errorf("URL %s does not name %s", cluster.URL("postgres"), want)
	}
	connect(t, cluster.URL("postgres"))
}

func TestStartWithoutBinaries(t *testing.T) {
	t.Parallel()

	_, err := Start(t.Context(), Config{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start = %v, want ErrNotInstalled", err)
	}
}

func TestStartFailureShowsServerLog(t *testing.T) {
	t.Parallel()

	_, err := Start(t.Context(), Config{Settings: map[string]string{"no_such_setting": "1"}})
	if err == nil {
		t.Fatal("Start succeeded with an unknown setting")
	}
	if want := "no_such_setting"; !strings.Contains(err.Error(), want) {
		t.Errorf("error does not quote the server's log about %s: %v", want, err)
	}
}

// startCluster starts a cluster that is stopped when the test ends.
func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	cluster, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("error starting cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cluster.Stop(ctx); err != nil {
			t.Errorf("error stopping cluster: %v", err)
		}
	})
	return cluster
}

// connect opens a connection that is closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("error connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
