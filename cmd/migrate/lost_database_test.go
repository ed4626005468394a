package main

import (
	"net"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

// TestLostDatabase holds lostDatabase to real errors: a connect that fails and a session the
// server shut down are worth another run of up once the database answers again; a migration's
// own error is not.
func TestLostDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := listener.Addr().String()
	listener.Close()
	_, refused := pgx.Connect(ctx, "postgres://postgres@"+closedAddr+"/postgres?connect_timeout=5")

	url := dbtest.NewDB(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, syntax := conn.Exec(ctx, `ALTER TABLE no_such_table ADD COLUMN n int`)
	killer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)
	if _, err := killer.Exec(ctx, `SELECT pg_terminate_backend($1)`, conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	_, terminated := conn.Exec(ctx, `SELECT 1`)

	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"ConnectRefused", refused, true},
		{"SessionTerminated", terminated, true},
		{"MigrationError", syntax, false},
	} {
		if tt.err == nil {
			t.Fatalf("%s: want an error to classify", tt.name)
		}
		if got := lostDatabase(tt.err); got != tt.want {
			t.Errorf("%s: lostDatabase(%v) = %t, want %t", tt.name, tt.err, got, tt.want)
		}
	}
}
