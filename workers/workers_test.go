package workers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
)

// The enqueuer hands River every staged job of jobargs.StagedJobNames: a name with no worker
// here would become a job that no worker takes, retried until River discards it.
func TestRegisterWorksEveryStagedJobName(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	ws := river.NewWorkers()
	if err := Register(ws, Deps{Pool: &pgxpool.Pool{}, Mailer: mailer.NewLog(logger), MailFrom: testMailFrom, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	for _, name := range jobargs.StagedJobNames() {
		// River refuses, by panicking, a second worker for a kind that has one.
		registered := func() (registered bool) {
			defer func() {
				// Only River's refusal of a second worker counts; any other panic is no answer.
				if v := recover(); v != nil {
					if !strings.Contains(fmt.Sprint(v), "already registered") {
						t.Fatalf("adding a second worker for %q panicked for another reason: %v", name, v)
					}
					registered = true
				}
			}()
			river.AddWorkerArgs(ws, kindArgs(name), river.WorkFunc(func(context.Context, *river.Job[kindArgs]) error { return nil }))
			return false
		}()
		if !registered {
			t.Errorf("no worker registered for staged job name %q", name)
		}
	}
}

// kindArgs are args of any kind, to ask River whether a kind has a worker.
type kindArgs string

func (k kindArgs) Kind() string { return string(k) }

func TestRegister(t *testing.T) {
	t.Parallel()

	pool := &pgxpool.Pool{} // never used: Register only keeps it
	logger := slog.New(slog.DiscardHandler)
	valid := Deps{Pool: pool, Mailer: mailer.NewLog(logger), MailFrom: testMailFrom, Logger: logger}

	if err := Register(river.NewWorkers(), valid); err != nil {
		t.Fatalf("want valid deps accepted, got %v", err)
	}
	for name, modify := range map[string]func(*Deps){
		"NoPool":      func(d *Deps) { d.Pool = nil },
		"NoMailer":    func(d *Deps) { d.Mailer = nil },
		"BadMailFrom": func(d *Deps) { d.MailFrom = "receipts" },
	} {
		deps := valid
		modify(&deps)
		if err := Register(river.NewWorkers(), deps); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
