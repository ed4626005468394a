package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/phases"
)

// TestUIRefusesToStart: admin ui refuses to start where River's UI would answer anyone on a
// network, or where its login is half set, with a line naming what to set and a non-zero exit,
// before it opens the database it was given.
func TestUIRefusesToStart(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")
	databaseURL := dbtest.NewDB(t)
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"EveryInterface", []string{"UI_ADDR=:0"}, "beyond loopback, with no login: set UI_USERNAME and UI_PASSWORD"},
		{"EveryIPv4Interface", []string{"UI_ADDR=0.0.0.0:0"}, "beyond loopback, with no login"},
		{"EveryIPv6Interface", []string{"UI_ADDR=[::]:0"}, "beyond loopback, with no login"},
		{"UsernameAlone", []string{"UI_ADDR=127.0.0.1:0", "UI_USERNAME=ops"}, "UI_USERNAME and UI_PASSWORD go together"},
		{"PasswordAlone", []string{"UI_ADDR=:0", "UI_PASSWORD=secret"}, "UI_USERNAME and UI_PASSWORD go together"},
		{"ColonInUsername", []string{"UI_ADDR=127.0.0.1:0", "UI_USERNAME=ops:1", "UI_PASSWORD=secret"}, "must not contain a colon"},
		{"BadPathPrefix", []string{"UI_ADDR=127.0.0.1:0", "UI_PATH_PREFIX=river"}, "UI_PATH_PREFIX must be a clean absolute path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := proctest.Run(t, admin, append([]string{"DATABASE_URL=" + databaseURL}, tt.env...), "ui")
			if code != 1 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("want exit 1 and %q, got %d:\n%s%s", tt.want, code, stdout, stderr)
			}
		})
	}
}

// uiBundle is admin ui running on a database that holds one receipt job.
type uiBundle struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	job    *rivertype.JobRow
	env    []string
}

func setupUI(t *testing.T) *uiBundle {
	t.Helper()
	b := &uiBundle{}
	url := dbtest.NewDB(t)
	b.env = []string{"DATABASE_URL=" + url}
	var err error
	if b.pool, err = pgxpool.New(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.pool.Close)
	if b.client, err = river.NewClient(riverpgxv5.New(b.pool), &river.Config{}); err != nil {
		t.Fatal(err)
	}
	inserted, err := b.client.Insert(t.Context(), jobargs.SendRideReceipt{
		RideID: 4_611_686_018_427_387_904, UserID: 7, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.job = inserted.Job
	return b
}

// startUI starts admin ui with env and waits until it answers at url (with its login, if any).
func (b *uiBundle) startUI(t *testing.T, url string, env ...string) *proctest.Process {
	t.Helper()
	ui := proctest.Start(t, proctest.Build(t, "admin"), append(b.env, env...), "ui")
	proctest.WaitHTTP(t, ui, url+"/api/health-checks/complete", 60*time.Second)
	return ui
}

// get sends a GET to url with the basic auth user:password (none when user is empty).
func get(t *testing.T, url, user, password string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestUI runs admin ui as an operator behind a reverse proxy would: on loopback, with a login
// and a path prefix. Every request without the login is refused with the challenge that makes a
// browser ask for it; with it, River's pages and River's JSON API answer under the prefix and
// nowhere else, the API lists the receipt job with its ride, and a retry through it puts a
// discarded job back to work. SIGTERM stops it with exit 0.
func TestUI(t *testing.T) {
	t.Parallel()
	b := setupUI(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", proctest.FreePort(t))
	root := base + "/river"
	ui := b.startUI(t, strings.Replace(root, "://", "://ops:s3cret@", 1),
		"UI_ADDR="+strings.TrimPrefix(base, "http://"), "UI_USERNAME=ops", "UI_PASSWORD=s3cret", "UI_PATH_PREFIX=/river/")
	jobsURL := root + "/api/jobs?state=available"

	t.Run("RefusesWithoutTheLogin", func(t *testing.T) {
		for _, login := range [][2]string{{"", ""}, {"ops", "wrong"}, {"ops", "s3cre"}, {"root", "s3cret"}, {"ops", ""}} {
			for _, url := range []string{jobsURL, root + "/", root + fmt.Sprintf("/api/jobs/%d", b.job.ID)} {
				resp, body := get(t, url, login[0], login[1])
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic realm=") {
					t.Fatalf("%s as %q: want 401 with a Basic challenge, got %d %q: %s", url, login, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
				}
				if strings.Contains(string(body), "send_ride_receipt") {
					t.Fatalf("%s as %q: a refusal shows a job: %s", url, login, body)
				}
			}
		}
	})

	t.Run("ListsTheReceiptJob", func(t *testing.T) {
		resp, body := get(t, jobsURL, "ops", "s3cret")
		var list struct {
			Data []struct {
				ID   int64  `json:"id"`
				Kind string `json:"kind"`
				Args string `json:"args"` // the job's args as River stored them, in a string
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &list); resp.StatusCode != http.StatusOK || err != nil || len(list.Data) != 1 {
			t.Fatalf("want 200 with River's job list of one job, got %d %v: %s", resp.StatusCode, err, body)
		}
		var args jobargs.SendRideReceipt
		if err := json.Unmarshal([]byte(list.Data[0].Args), &args); err != nil || list.Data[0].ID != b.job.ID ||
			list.Data[0].Kind != jobargs.SendRideReceiptKind || args.RideID != 4_611_686_018_427_387_904 {
			t.Fatalf("want the receipt job %d with its ride, got %s (%v)", b.job.ID, body, err)
		}
	})

	t.Run("ServesItsPagesUnderThePrefix", func(t *testing.T) {
		resp, body := get(t, root+"/jobs", "ops", "s3cret")
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") || !strings.Contains(string(body), "/river/") {
			t.Fatalf("want River's page, its assets under /river/, got %d: %s", resp.StatusCode, body)
		}
		// The proxy routes /river to the UI unchanged; the UI answers nothing outside it.
		if resp, body := get(t, base+"/api/jobs?state=available", "ops", "s3cret"); resp.StatusCode == http.StatusOK {
			t.Fatalf("want nothing outside the prefix, got %d: %s", resp.StatusCode, body)
		}
	})

	t.Run("RetriesADiscardedJob", func(t *testing.T) {
		if _, err := b.pool.Exec(t.Context(), `UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = $1`, b.job.ID); err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, root+"/api/jobs/retry", strings.NewReader(fmt.Sprintf(`{"ids":["%d"]}`, b.job.ID)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("ops", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		job, err := b.client.JobGet(t.Context(), b.job.ID)
		if resp.StatusCode != http.StatusOK || err != nil || job.State != rivertype.JobStateAvailable {
			t.Fatalf("want the job available again after a 200, got %d and %+v, %v", resp.StatusCode, job, err)
		}
	})

	ui.Terminate(t, 15*time.Second)
}

// TestUIOnLoopbackWithoutLogin: without UI_ADDR, admin ui listens on 127.0.0.1 at PORT, as a
// Procfile manager gives it, and asks for no login there: no one off this machine reaches it.
func TestUIOnLoopbackWithoutLogin(t *testing.T) {
	t.Parallel()
	b := setupUI(t)
	port := proctest.FreePort(t)
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	ui := b.startUI(t, root, fmt.Sprintf("PORT=%d", port))
	if want := fmt.Sprintf(`url=http://127.0.0.1:%d/ basic_auth=false`, port); !strings.Contains(ui.Output(), want) {
		t.Fatalf("want the UI to say it serves %s, got:\n%s", want, ui.Output())
	}
	resp, body := get(t, root+"/api/jobs?state=available", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), jobargs.SendRideReceiptKind) {
		t.Fatalf("want the receipt job listed with no login, got %d: %s", resp.StatusCode, body)
	}
	ui.Terminate(t, 15*time.Second)
}
