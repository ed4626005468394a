package hacluster

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFormation loses the primary twice, once by its machine's death and once by its freezing,
// and checks that the standby takes over each time with every acknowledged commit, and that the
// old primary comes back as the new one's standby.
func TestFormation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := Start(ctx, Config{Tuned: true, Database: "rr", Output: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Errorf("error stopping the formation: %v", err)
		}
	})

	conn, err := pgx.Connect(ctx, f.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE acked (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	acked := 0
	write := func() {
		t.Helper()
		conn, err := pgx.Connect(ctx, f.URL()+"&connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "INSERT INTO acked VALUES ($1)", acked+1); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	requireAcked := func() {
		t.Helper()
		conn, err := pgx.Connect(ctx, f.URL()+"&connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM acked").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != acked {
			t.Fatalf("want the %d acknowledged rows after the failover, got %d", acked, n)
		}
	}

	for _, lose := range []string{"Kill", "Freeze"} {
		write()
		old, err := f.Primary(ctx)
		if err != nil || old < 0 {
			t.Fatalf("no primary: %d, %v", old, err)
		}
		started := time.Now()
		if lose == "Kill" {
			err = f.Kill(old)
		} else {
			err = f.Freeze(old)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.WaitPromoted(ctx, 1-old); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: node%d promoted %s after node%d was lost", lose, 2-old, time.Since(started).Round(time.Millisecond), old+1)
		requireAcked()
		write()
		if lose == "Kill" {
			err = f.RunNode(old)
		} else {
			err = f.Thaw(old)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		requireAcked()
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
