package resource

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// Bodies stored by earlier releases are replayed as they are, next to bodies rendered now: both
// must be byte for byte the same for one ride.
func TestNewRideCreated(t *testing.T) {
	t.Parallel()
	chargeID := "ch_123"
	ride := &models.Ride{
		ID:             4611686018427387904, // past a double's 53 bits
		CreatedAt:      time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.FixedZone("CEST", 2*60*60)),
		OriginLat:      48.8566,
		OriginLon:      2.3522,
		TargetLat:      -33.8688,
		TargetLon:      151.2093,
		StripeChargeID: &chargeID,
		UserID:         7,
	}
	got, err := json.Marshal(NewRideCreated(ride))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"message":"Ride booked and paid. Your pilot is on the way!","ride":{"id":"4611686018427387904",` +
		`"origin_lat":48.8566,"origin_lon":2.3522,"target_lat":-33.8688,"target_lon":151.2093,` +
		`"stripe_charge_id":"ch_123","created_at":"2024-05-06T05:08:09.123456Z"}}`
	if string(got) != want {
		t.Fatalf("want\n%s\ngot\n%s", want, got)
	}
}

// A ride read back shows its status; a cancel's answer its refund too.
func TestNewRideStatus(t *testing.T) {
	t.Parallel()
	chargeID, refundID := "ch_123", "re_456"
	ride := &models.Ride{ID: 42, StripeChargeID: &chargeID, Status: models.RideStatusBooked}
	got, err := json.Marshal(NewRide(ride))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"status":"booked"`; !strings.Contains(string(got), want) || strings.Contains(string(got), "stripe_refund_id") {
		t.Errorf("want %s and no refund in %s", want, got)
	}

	ride.Status, ride.StripeRefundID = models.RideStatusCancelled, &refundID
	got, err = json.Marshal(NewRideCancelled(ride))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"status":"cancelled","stripe_refund_id":"re_456"}`; !strings.Contains(string(got), want) {
		t.Errorf("want %s in %s", want, got)
	}
}
