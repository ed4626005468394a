package rides

// This file compiles only against a client whose problem codes, statuses and optional headers
// kept their types: rides.gen.go is generated from api/openapi.yaml by the check beside it.

import (
	"context"
	"fmt"
)

// explainRefusal switches on a booking's 402 code by its generated constants.
func explainRefusal(ctx context.Context, c *ClientWithResponses, key string, ride RideRequest) (string, error) {
	resp, err := c.CreateRideWithResponse(ctx, &CreateRideParams{IdempotencyKey: key}, ride)
	if err != nil {
		return "", fmt.Errorf("error booking: %w", err)
	}
	if refused := resp.ApplicationproblemJSON402; refused != nil {
		var code PaymentRefusedCode = refused.Code // a typed code, not interface{}
		switch code {
		case PaymentRefusedCodeCardDeclined:
			return "declined: " + refused.Detail, nil
		case PaymentRefusedCodePaymentRejected:
			return "rejected", nil
		}
	}
	if conflict := resp.ApplicationproblemJSON409; conflict != nil && conflict.Code == BookingConflictCodeIdempotencyKeyInUse {
		return "retry", nil
	}
	if created := resp.JSON201; created != nil {
		return "booked " + created.Ride.Id, nil
	}
	return "", nil
}

// rideStates names what became of each ride of a page, by the generated status constants.
func rideStates(list RideList) map[string]string {
	var object RideListObject = list.Object // typed, not interface{}
	states := map[string]string{"object": string(object)}
	for _, ride := range list.Data {
		if ride.Status != nil && *ride.Status == RideStatusDeclined {
			states[ride.Id] = "declined"
		}
	}
	return states
}

// replayed tells a stored answer from a fresh one: the header is optional, so a pointer.
func replayed(h CreateRideResponse201Headers) bool {
	var header *string = h.IdempotentReplayed
	return header != nil && *header == "true"
}

var _, _, _ = explainRefusal, rideStates, replayed
