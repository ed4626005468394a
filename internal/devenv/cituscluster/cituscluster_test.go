package cituscluster

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCreateDatabase creates a database across the cluster and distributes a table in it: its
// shards are placed on both workers.
func TestCreateDatabase(t *testing.T) {
	if err := Installed(); err != nil {
		t.Skip(err)
	}
	ctx := t.Context()
	c, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	start := time.Now()
	if err := c.CreateDatabase(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	t.Logf("database created in %s", time.Since(start))
	conn, err := pgx.Connect(ctx, c.Coordinator.URL("one"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `
		CREATE TABLE t (user_id bigint, v text);
		SELECT create_distributed_table('t', 'user_id');
		INSERT INTO t SELECT i, 'x' FROM generate_series(1, 100) i`); err != nil {
		t.Fatal(err)
	}
	var nodes int
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT (nodename, nodeport)) FROM citus_shards WHERE table_name = 't'::regclass`).Scan(&nodes); err != nil {
		t.Fatal(err)
	}
	if nodes != 2 {
		t.Errorf("want the shards on both workers, got %d nodes", nodes)
	}
	conn.Close(ctx)
	if err := c.DropDatabase(ctx, "one"); err != nil {
		t.Fatal(err)
	}
}
