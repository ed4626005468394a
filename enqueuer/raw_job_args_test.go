package enqueuer_test

import (
	"encoding/json"
	"testing"

	"github.com/rocketrides/rocketrides/enqueuer"
)

func TestDecodeRaw(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		jobName string
		args    string
		wantErr bool
	}{
		{"Valid", "send_ride_receipt", `{"ride_id": 1}`, false},
		{"EmptyName", "", `{}`, true},
		{"NotJSON", "send_ride_receipt", `{"ride_id":`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args, opts, err := enqueuer.DecodeRaw(tt.jobName, json.RawMessage(tt.args))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			encoded, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			if args.Kind() != tt.jobName || string(encoded) != `{"ride_id":1}` || opts != nil {
				t.Errorf("want kind %s, args %s and default options, got %s %s %+v", tt.jobName, tt.args, args.Kind(), encoded, opts)
			}
		})
	}
}
