package phases

// RideParams are the parameters of a ride request, as stored on its key and compared against
// every retry. They are parsed numbers, not the client's strings, so "0" and "0.0" match.
type RideParams struct {
	OriginLat float64 `json:"origin_lat"`
	OriginLon float64 `json:"origin_lon"`
	TargetLat float64 `json:"target_lat"`
	TargetLon float64 `json:"target_lon"`
}
