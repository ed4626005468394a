// Package resource holds the API's resources as clients see them in JSON. It is a leaf,
// importing only models, because two packages that must not import each other render a ride:
// phases stores the 201 body in a request's last atomic phase, where a retry replays it byte for
// byte, and api serves GET /rides/{id}. api/openapi.yaml describes the same shapes.
package resource

import (
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// Ride is how a ride looks to API clients.
type Ride struct {
	// ID is a string: a random 63-bit id does not survive a JavaScript client's doubles.
	ID             int64     `json:"id,string"`
	OriginLat      float64   `json:"origin_lat"`
	OriginLon      float64   `json:"origin_lon"`
	TargetLat      float64   `json:"target_lat"`
	TargetLon      float64   `json:"target_lon"`
	StripeChargeID *string   `json:"stripe_charge_id"`
	CreatedAt      time.Time `json:"created_at"`

	// ReceiptSentAt is when the receipt was mailed, absent until then: so also from the 201,
	// which must stay byte for byte what a retry replays.
	ReceiptSentAt *time.Time `json:"receipt_sent_at,omitempty"`

	// Status is what became of the ride's charge: booked, declined, cancelled, refunded or disputed.
	// Absent from the 201 alone (a ride just booked is booked), so that every stored 201 has one
	// shape, whenever it was stored.
	Status string `json:"status,omitempty"`

	// StripeRefundID is the refund a cancel made, absent until then.
	StripeRefundID *string `json:"stripe_refund_id,omitempty"`
}

// NewRide renders ride for clients.
func NewRide(ride *models.Ride) Ride {
	return Ride{
		ID:             ride.ID,
		OriginLat:      ride.OriginLat,
		OriginLon:      ride.OriginLon,
		TargetLat:      ride.TargetLat,
		TargetLon:      ride.TargetLon,
		StripeChargeID: ride.StripeChargeID,
		CreatedAt:      ride.CreatedAt.UTC(),
		ReceiptSentAt:  utc(ride.ReceiptSentAt),
		Status:         string(ride.Status),
		StripeRefundID: ride.StripeRefundID,
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// RideList is a page of a rider's rides, newest first, in Stripe's list shape: has_more says
// whether another page follows, which GET /rides?starting_after= the last ride's id reads.
type RideList struct {
	Object  string `json:"object"` // always "list"
	URL     string `json:"url"`    // always "/rides"
	Data    []Ride `json:"data"`
	HasMore bool   `json:"has_more"`
}

// NewRideList renders a page of rides for clients.
func NewRideList(rides []*models.Ride, hasMore bool) RideList {
	list := RideList{Object: "list", URL: "/rides", Data: make([]Ride, len(rides)), HasMore: hasMore}
	for i, ride := range rides {
		list.Data[i] = NewRide(ride)
	}
	return list
}

// RideCreated is the body of a successful ride request or cancel, stored with its idempotency key and
// replayed to every retry.
type RideCreated struct {
	Message string `json:"message"`
	Ride    Ride   `json:"ride"`
}

// NewRideCreated is the body of a successful ride request that booked ride.
func NewRideCreated(ride *models.Ride) RideCreated {
	r := NewRide(ride)
	r.Status = ""
	return RideCreated{
		Message: "Ride booked and paid. Your pilot is on the way!",
		Ride:    r,
	}
}

// NewRideCancelled is the body of a cancel that refunded ride, stored with its idempotency key
// and replayed to every retry.
func NewRideCancelled(ride *models.Ride) RideCreated {
	return RideCreated{
		Message: "Ride cancelled. Your charge is refunded to your card.",
		Ride:    NewRide(ride),
	}
}
