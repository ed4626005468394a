package phases

import (
	"encoding/json"
	"fmt"
)

// RideParams are the parameters of a ride request, as stored on its key and compared against
// every retry. They are parsed numbers, not the client's strings, so "0" and "0.0" match.
type RideParams struct {
	OriginLat float64 `json:"origin_lat"`
	OriginLon float64 `json:"origin_lon"`
	TargetLat float64 `json:"target_lat"`
	TargetLon float64 `json:"target_lon"`
}

// sameParams reports whether the params stored on a key are the ones a retry sent.
func sameParams(stored json.RawMessage, params RideParams) (bool, error) {
	var s RideParams
	if err := json.Unmarshal(stored, &s); err != nil {
		return false, fmt.Errorf("error decoding stored request params: %w", err)
	}
	return s == params, nil
}
