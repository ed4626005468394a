package jobargs

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// stagedReceipt is a receipt job's args as the API has staged them since the job existed, and as
// rows in staged_jobs and river_job hold them: a release that cannot read it strands them.
const stagedReceipt = `{"ride_id":"42","user_id":7,"amount":2000,"currency":"usd"}`

func TestDecodeStagedJob(t *testing.T) {
	t.Parallel()

	t.Run("DecodesAStoredReceiptJob", func(t *testing.T) {
		t.Parallel()
		args, opts, err := DecodeStagedJob(SendRideReceiptKind, json.RawMessage(stagedReceipt))
		if err != nil {
			t.Fatal(err)
		}
		receipt, ok := args.(SendRideReceipt)
		if !ok || receipt != (SendRideReceipt{RideID: 42, UserID: 7, Amount: 2000, Currency: "usd"}) {
			t.Fatalf("unexpected args %#v", args)
		}
		if args.Kind() != "send_ride_receipt" {
			t.Errorf("want kind send_ride_receipt, got %q", args.Kind())
		}
		if opts == nil || !opts.UniqueOpts.ByArgs || opts.MaxAttempts != 10 {
			t.Errorf("want unique insert options with 10 attempts, got %+v", opts)
		}

		// What River stores is, byte for byte, what the API staged.
		encoded, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		if string(encoded) != stagedReceipt {
			t.Fatalf("want %s, got %s", stagedReceipt, encoded)
		}
	})

	for _, tt := range []struct {
		name, jobName, args string
	}{
		{"UnknownJobName", "send_ride_invoice", stagedReceipt},
		{"NotJSON", SendRideReceiptKind, `{"ride_id":`},
		{"WrongType", SendRideReceiptKind, `{"ride_id":1,"user_id":1,"amount":2000,"currency":"usd"}`},
		{"NoRide", SendRideReceiptKind, `{"user_id":1,"amount":2000,"currency":"usd"}`},
		{"NoUser", SendRideReceiptKind, `{"ride_id":"1","amount":2000,"currency":"usd"}`},
		{"NoAmount", SendRideReceiptKind, `{"ride_id":"1","user_id":1,"currency":"usd"}`},
		{"BadCurrency", SendRideReceiptKind, `{"ride_id":"1","user_id":1,"amount":2000,"currency":"dollars"}`},
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
	if !slices.Contains(names, "send_ride_receipt") {
		t.Errorf("want send_ride_receipt among the staged job names, got %v", names)
	}
	for _, name := range names {
		if _, _, err := DecodeStagedJob(name, json.RawMessage(`{}`)); errors.Is(err, ErrUnknownJobName) {
			t.Errorf("%q is a staged job name that DecodeStagedJob does not know", name)
		}
	}
}

func TestStagedAt(t *testing.T) {
	t.Parallel()
	stagedAt := time.Date(2025, 3, 1, 12, 30, 0, 123456000, time.FixedZone("CET", 3600))

	for _, tt := range []struct {
		name     string
		metadata string
		want     string // the metadata AddStagedAt returns
	}{
		{"Empty", "", `{"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
		{"EmptyObject", "{}", `{"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
		{"KeepsOtherKeys", `{"a": 1}`, `{"a":1,"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
		{"Replaces", `{"rocketrides_staged_at": "2000-01-01T00:00:00Z"}`, `{"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := AddStagedAt([]byte(tt.metadata), stagedAt)
			if err != nil || string(got) != tt.want {
				t.Fatalf("AddStagedAt: want %s, got %s (%v)", tt.want, got, err)
			}
			read, ok := StagedAt(got)
			if !ok || !read.Equal(stagedAt) {
				t.Fatalf("StagedAt: want %s, got %s (%v)", stagedAt, read, ok)
			}
		})
	}

	t.Run("RefusesMetadataThatIsNoObject", func(t *testing.T) {
		t.Parallel()
		if _, err := AddStagedAt([]byte(`[1]`), stagedAt); err == nil {
			t.Fatal("want an error")
		}
	})

	t.Run("ReadsNothingWhereNothingWasAdded", func(t *testing.T) {
		t.Parallel()
		for _, metadata := range []string{"", "{}", `{"a": 1}`, `{"rocketrides_staged_at": "yesterday"}`, "not json"} {
			if got, ok := StagedAt([]byte(metadata)); ok {
				t.Errorf("%q: want nothing, got %s", metadata, got)
			}
		}
	})
}
