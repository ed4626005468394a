package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	migrate := proctest.Build(t, "migrate")
	env := []string{"DATABASE_URL=" + dbtest.NewEmptyDB(t)}

	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := proctest.Run(t, migrate, env, args...)
		if code != 0 {
			t.Fatalf("migrate %v exited %d: %s%s", args, code, out, errOut)
		}
		return out
	}

	if out := run("status"); !strings.Contains(out, "pending") {
		t.Fatalf("want pending migrations on an empty database, got:\n%s", out)
	}
	run("up")
	run("up") // a second run is a no-op
	if out := run("status"); strings.Contains(out, "pending") {
		t.Fatalf("want nothing pending after up, got:\n%s", out)
	}
	run("down")
	if out := run("status"); !strings.Contains(out, "pending") {
		t.Fatalf("want one migration pending after down, got:\n%s", out)
	}
	run("up")

	for _, args := range [][]string{nil, {"sideways"}} {
		if _, errOut, code := proctest.Run(t, migrate, env, args...); code == 0 || !strings.Contains(errOut, "usage") {
			t.Fatalf("migrate %v: want usage and a non-zero exit, got %d: %s", args, code, errOut)
		}
	}
	if _, errOut, code := proctest.Run(t, migrate, nil, "up"); code == 0 || !strings.Contains(errOut, "DATABASE_URL") {
		t.Fatalf("want a missing DATABASE_URL named, got %d: %s", code, errOut)
	}
}

// TestUpBringsRiverUpToDate: goose installs River's schema once, as migration 2; the migrations of a
// later River, which goose does not know of, are applied by `migrate up` too, as every process
// that finds River's schema behind tells the operator to run it.
func TestUpBringsRiverUpToDate(t *testing.T) {
	t.Parallel()
	migrate := proctest.Build(t, "migrate")
	url := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + url}

	version := dbtest.RiverBehind(t, url)
	out, errOut, code := proctest.Run(t, migrate, env, "up")
	if want := fmt.Sprintf("OK    up River migration %d\n", version); code != 0 || out != want {
		t.Fatalf("want exactly %q, got %d %q %s", want, code, out, errOut)
	}
	out, errOut, code = proctest.Run(t, migrate, env, "up")
	if code != 0 || !strings.HasPrefix(out, "nothing to apply") {
		t.Fatalf("want nothing left to apply, got %d %q %s", code, out, errOut)
	}
}
