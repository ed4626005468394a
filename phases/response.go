package phases

import (
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// HTTP status codes of the responses this package stores. They are plain numbers because the
// state machine knows nothing of HTTP; the API serves whatever was stored.
const (
	statusCreated             = 201
	statusPaymentRequired     = 402
	statusInternalServerError = 500
)

// RideCreatedBody is the stored body of a successful ride request.
type RideCreatedBody struct {
	Message string   `json:"message"`
	Ride    RideJSON `json:"ride"`
}

// RideJSON is how a ride looks to API clients.
type RideJSON struct {
	// ID is a string: a random 63-bit id does not survive a JavaScript client's doubles.
	ID             int64     `json:"id,string"`
	OriginLat      float64   `json:"origin_lat"`
	OriginLon      float64   `json:"origin_lon"`
	TargetLat      float64   `json:"target_lat"`
	TargetLon      float64   `json:"target_lon"`
	StripeChargeID *string   `json:"stripe_charge_id"`
	CreatedAt      time.Time `json:"created_at"`
}

// NewRideJSON renders a ride for clients.
func NewRideJSON(ride *models.Ride) RideJSON {
	return RideJSON{
		ID:             ride.ID,
		OriginLat:      ride.OriginLat,
		OriginLon:      ride.OriginLon,
		TargetLat:      ride.TargetLat,
		TargetLon:      ride.TargetLon,
		StripeChargeID: ride.StripeChargeID,
		CreatedAt:      ride.CreatedAt.UTC(),
	}
}

// NewRideCreatedBody is the stored body of a successful ride request for ride.
func NewRideCreatedBody(ride *models.Ride) RideCreatedBody {
	return RideCreatedBody{
		Message: "Ride booked and paid. Your pilot is on the way!",
		Ride:    NewRideJSON(ride),
	}
}
