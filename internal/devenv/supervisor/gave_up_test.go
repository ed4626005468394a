package supervisor

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A process that exits because its database did not answer at start says so on stderr, as
// cmd/internal/bootstrap words it; GaveUpOnDatabase tells that exit from any other.
func TestGaveUpOnDatabase(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir()
	script := func(name, stderr string) {
		body := "#!/bin/sh\necho 'listening' \necho '" + stderr + "' >&2\necho '\t127.0.0.1:5432: timeout' >&2\nexit 1\n"
		if err := os.WriteFile(filepath.Join(binDir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script("gives-up", "gives-up: database not reachable after 10s (is Postgres running, and DATABASE_URL right?): failed to connect")
	script("fails", "fails: error creating River client: no such table")

	sup := New(binDir, NewPrefixWriter(io.Discard))
	for name, want := range map[string]bool{"gives-up": true, "fails": false} {
		p, err := sup.Start("", name, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		if p.Err() == nil || p.GaveUpOnDatabase() != want {
			t.Errorf("%s: want an exit that gave up on the database: %t, got %t (%v)", name, want, p.GaveUpOnDatabase(), p.Err())
		}
	}
}
