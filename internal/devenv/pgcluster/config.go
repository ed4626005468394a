package pgcluster

import (
	"log/slog"
	"time"
)

// Config says which cluster to start and how. The zero value is a throwaway cluster reachable
// only through a Unix socket.
type Config struct {
	// DataDir holds the cluster's files. Empty means a temporary directory that Stop removes. A
	// directory that already holds a cluster is used as it is, which is what a persistent
	// development database wants. When running as root, the postgres OS user must be able to
	// reach it.
	DataDir string

	// Port is the TCP port the server listens on, on localhost. Zero means no TCP at all, only a
	// Unix socket in a private directory, so that test binaries running side by side never fight
	// over a port.
	Port int

	// BinDir is the directory holding postgres and initdb. Empty means: the one on PATH, else
	// pg_config --bindir, else the newest /usr/lib/postgresql/*/bin.
	BinDir string

	// Settings are server settings (postgres -c name=value) applied over the defaults, which
	// trade durability for speed (see defaultSettings).
	Settings map[string]string

	// StartTimeout is how long StartServer waits for the server to accept connections. Zero
	// means 30 seconds, far more than the second a start takes, for a loaded CI machine.
	StartTimeout time.Duration

	// Logger receives the cluster's lifecycle events and, at debug level, the server's own log.
	// Nil discards both.
	Logger *slog.Logger
}

// socketOnlyPort names the socket file (.s.PGSQL.5432) of a cluster that listens on no TCP
// port. The socket directory is private to the cluster, so the number can never clash.
const socketOnlyPort = 5432

// defaultStartTimeout is the default of Config.StartTimeout.
const defaultStartTimeout = 30 * time.Second

// defaultSettings trade durability for speed: a database that a crash of the machine would
// corrupt is one a test throws away anyway, and a developer can recreate.
func defaultSettings() map[string]string {
	return map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		// Every test opens a pool of its own, and tests run in parallel.
		"max_connections": "300",
	}
}
