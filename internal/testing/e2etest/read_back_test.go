package e2etest

import (
	"errors"
	"slices"
	"testing"

	"github.com/rocketrides/rocketrides/client"
)

// TestClientReadsRidesBack books rides through the real API with the Go client and reads them
// back with it: a page at a time, newest first, and one by one.
func TestClientReadsRidesBack(t *testing.T) {
	t.Parallel()
	s := newMurphyStack(t, murphyOptions{})
	api := s.startAPI(0)
	c := s.client(api.URL)
	ctx := t.Context()

	var booked []string // oldest first
	for range 3 {
		result, err := c.CreateRide(ctx, client.RideParams{OriginLat: 37.338208, OriginLon: -121.886329, TargetLat: 37.7749, TargetLon: -122.4194})
		if err != nil {
			t.Fatal(err)
		}
		booked = append(booked, result.Ride.ID)
	}

	var listed []string
	for params := (client.ListParams{Limit: 2}); ; {
		page, err := c.ListRides(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, ride := range page.Rides {
			listed = append(listed, ride.ID)
		}
		if !page.HasMore {
			break
		}
		params.StartingAfter = page.Rides[len(page.Rides)-1].ID
	}
	newestFirst := slices.Clone(booked)
	slices.Reverse(newestFirst)
	if !slices.Equal(listed, newestFirst) {
		t.Fatalf("want the rides newest first, %v, got %v", newestFirst, listed)
	}

	ride, err := c.GetRide(ctx, booked[0])
	if err != nil || ride.ID != booked[0] || ride.StripeChargeID == nil || ride.OriginLat != 37.338208 || ride.OriginLon != -121.886329 {
		t.Fatalf("want the first ride, charged, its coordinates exact, got %+v, %v", ride, err)
	}
	var apiErr *client.APIError
	if _, err := c.GetRide(ctx, "1"); !errors.As(err, &apiErr) || apiErr.Code != "not_found" {
		t.Fatalf("want not_found for a ride that is not the rider's, got %v", err)
	}
}
