package workers

import (
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/phases"
)

func TestDecodeStagedJob(t *testing.T) {
	t.Parallel()

	t.Run("RoundTripsTheStagedReceiptJob", func(t *testing.T) {
		t.Parallel()
		staged := phases.ReceiptJobArgs{RideID: 42, UserID: 7, Amount: phases.RideAmountCents, Currency: phases.RideCurrency}
		raw, err := json.Marshal(staged)
		if err != nil {
			t.Fatal(err)
		}

		args, opts, err := DecodeStagedJob(phases.ReceiptJobName, raw)
		if err != nil {
			t.Fatal(err)
		}
		receipt, ok := args.(SendRideReceiptArgs)
		if !ok || receipt != (SendRideReceiptArgs{RideID: 42, UserID: 7, Amount: 2000, Currency: "usd"}) {
			t.Fatalf("unexpected args %#v", args)
		}
		if args.Kind() != phases.ReceiptJobName {
			t.Errorf("want kind %q, got %q", phases.ReceiptJobName, args.Kind())
		}
		if opts == nil || !opts.UniqueOpts.ByArgs || opts.MaxAttempts != SendRideReceiptMaxAttempts {
			t.Errorf("want unique insert options with %d attempts, got %+v", SendRideReceiptMaxAttempts, opts)
		}

		// What River stores is what the API staged.
		encoded, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		var back phases.ReceiptJobArgs
		if err := json.Unmarshal(encoded, &back); err != nil || back != staged {
			t.Fatalf("want %s to decode back to %+v, got %+v (%v)", encoded, staged, back, err)
		}
	})

	for _, tt := range []struct {
		name, jobName, args string
	}{
		{"UnknownJobName", "send_ride_invoice", `{"ride_id":"1","user_id":1,"amount":2000,"currency":"usd"}`},
		{"NotJSON", phases.ReceiptJobName, `{"ride_id":`},
		{"WrongType", phases.ReceiptJobName, `{"ride_id":1,"user_id":1,"amount":2000,"currency":"usd"}`},
		{"NoRide", phases.ReceiptJobName, `{"user_id":1,"amount":2000,"currency":"usd"}`},
		{"NoUser", phases.ReceiptJobName, `{"ride_id":"1","amount":2000,"currency":"usd"}`},
		{"NoAmount", phases.ReceiptJobName, `{"ride_id":"1","user_id":1,"currency":"usd"}`},
		{"BadCurrency", phases.ReceiptJobName, `{"ride_id":"1","user_id":1,"amount":2000,"currency":"dollars"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args, opts, err := DecodeStagedJob(tt.jobName, json.RawMessage(tt.args))
			if err == nil || args != nil || opts != nil {
				t.Fatalf("want an error and nothing else, got %v, %v, %v", args, opts, err)
			}
			if unknown := errors.Is(err, ErrUnknownJobName); unknown != (tt.name == "UnknownJobName") {
				t.Fatalf("want errors.Is(err, ErrUnknownJobName) only for an unknown name, got %v", err)
			}
		})
	}
}

// The enqueuer takes only the staged jobs of StagedJobNames and hands each to DecodeStagedJob:
// a name in the list that DecodeStagedJob did not know would be set aside as broken.
func TestStagedJobNames(t *testing.T) {
	t.Parallel()
	names := StagedJobNames()
	if !slices.Contains(names, phases.ReceiptJobName) {
		t.Errorf("want %q among the staged job names, got %v", phases.ReceiptJobName, names)
	}
	for _, name := range names {
		if _, _, err := DecodeStagedJob(name, json.RawMessage(`{}`)); errors.Is(err, ErrUnknownJobName) {
			t.Errorf("%q is a staged job name that DecodeStagedJob does not know", name)
		}
	}
}

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
