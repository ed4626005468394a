package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestSeed(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")

	t.Run("SeedsAndPrintsWhatItMade", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewDB(t)
		out, errOut, code := proctest.Run(t, admin, []string{"DATABASE_URL=" + url}, "seed", "-rides", "40", "-riders", "6")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var made struct {
			Riders        int      `json:"riders"`
			Rides         int      `json:"rides"`
			SequentialIDs *bool    `json:"sequential_ids"`
			Seconds       *float64 `json:"seconds"`
		}
		if err := json.Unmarshal([]byte(out), &made); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 ||
			made.Riders != 6 || made.Rides != 40 || made.SequentialIDs == nil || *made.SequentialIDs || made.Seconds == nil {
			t.Fatalf("want one JSON line saying 6 riders, 40 rides, random ids and the time taken; got %q", out)
		}
		if got := counts(t, url); got != [4]int{6, 40, 40, 40} {
			t.Fatalf("users, keys, rides and audit records: %v, want [6 40 40 40]", got)
		}
	})

	// No DATABASE_URL: a command that looked at the database before refusing the input would
	// fail with exit status 1 saying so.
	t.Run("BadInputIsRefusedBeforeTheDatabase", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name string
			args []string
			want string
		}{
			{"NegativeRides", []string{"-rides", "-1", "-riders", "3"}, "rides must be 0 or more"},
			{"NegativeRiders", []string{"-rides", "0", "-riders", "-2"}, "riders must be 0 or more"},
			{"RidesWithoutRiders", []string{"-rides", "5", "-riders", "0"}, "5 rides need at least 1 rider"},
			{"NoRides", []string{"-riders", "3"}, "give both -rides and -riders"},
			{"NoRiders", []string{"-rides", "3"}, "give both -rides and -riders"},
			{"UnknownFlag", []string{"-rides", "5", "-riders", "2", "-users", "2"}, "flag provided but not defined: -users"},
			{"NotANumber", []string{"-rides", "many", "-riders", "2"}, "invalid value"},
			{"ExtraArgument", []string{"-rides", "5", "-riders", "2", "now"}, `unexpected argument "now"`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				out, errOut, code := proctest.Run(t, admin, nil, append([]string{"seed"}, tt.args...)...)
				if code != 2 || !strings.Contains(errOut, tt.want) || out != "" {
					t.Fatalf("want exit status 2 saying %q and nothing on stdout; got %d, %q, %q", tt.want, code, errOut, out)
				}
			})
		}
	})
}

// counts returns how many users, idempotency keys, rides and audit records the database holds.
func counts(t *testing.T, url string) [4]int {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n [4]int
	err = pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM users), (SELECT count(*) FROM idempotency_keys),
		(SELECT count(*) FROM rides), (SELECT count(*) FROM audit_records)`).Scan(&n[0], &n[1], &n[2], &n[3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
