package phases

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// FuzzSameParams compares any two sets of parameters, the first stored as the phases store it
// and read back both as written and as Postgres's jsonb gives it back. Stored parameters
// always match themselves, and match other parameters exactly when the numbers are equal (0 and
// -0 included, which the API reads from "0" and "-0"). The API accepts only finite numbers
// (FuzzParseRideParams in api holds it to that), so only those are compared.
func FuzzSameParams(f *testing.F) {
	f.Add(37.7749, -122.4194, 37.3382, -121.8863, 37.7749, -122.4194, 37.3382, -121.8863)
	f.Add(0.0, math.Copysign(0, -1), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
	f.Add(90.0, -180.0, -90.0, 180.0, 90.0, -180.0, -90.0, 179.99999999999997)
	f.Add(5e-324, 1e-7, 2.2250738585072014e-308, 0.1, 5e-324, 1e-7, 2.2250738585072014e-308, 0.1)
	f.Add(1.0/3, 0.1+0.2, 1e21, -1e-300, 0.3333333333333333, 0.3, 1e21, -1e-300)

	f.Fuzz(func(t *testing.T, a, b, c, d, e, g, h, i float64) {
		p := RideParams{OriginLat: a, OriginLon: b, TargetLat: c, TargetLon: d}
		q := RideParams{OriginLat: e, OriginLon: g, TargetLat: h, TargetLon: i}
		if !finiteParams(p) || !finiteParams(q) {
			return
		}
		stored, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("error encoding %+v: %s", p, err)
		}
		for _, spelling := range [][]byte{stored, jsonbSpelling(p)} {
			if same, err := sameParamsAs(p)(spelling); err != nil || !same {
				t.Fatalf("%+v stored as %s does not match itself (%v)", p, spelling, err)
			}
			if same, err := sameParamsAs(q)(spelling); err != nil || same != (p == q) {
				t.Fatalf("%+v stored as %s against %+v: same=%t (%v), want %t", p, spelling, q, same, err, p == q)
			}
		}
	})
}

// jsonbSpelling is params as Postgres's jsonb gives them back: keys ordered by length, then
// bytes (all four have ten characters), and numbers in plain decimal notation, never with an
// exponent, and -0 as 0 (numeric has no negative zero). TestJSONBSpelling holds it to what
// Postgres does.
func jsonbSpelling(params RideParams) []byte {
	number := func(f float64) string {
		if f == 0 {
			return "0"
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return []byte(`{"origin_lat": ` + number(params.OriginLat) + `, "origin_lon": ` + number(params.OriginLon) +
		`, "target_lat": ` + number(params.TargetLat) + `, "target_lon": ` + number(params.TargetLon) + `}`)
}

func finiteParams(params RideParams) bool {
	for _, f := range []float64{params.OriginLat, params.OriginLon, params.TargetLat, params.TargetLon} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// TestJSONBSpelling checks jsonbSpelling, which FuzzSameParams stands in for Postgres with,
// against Postgres itself, on the numbers hardest to spell.
func TestJSONBSpelling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, params := range []RideParams{
		testParams,
		{OriginLat: math.Copysign(0, -1), OriginLon: 5e-324, TargetLat: 1e-7, TargetLon: 2.2250738585072014e-308},
		{OriginLat: 1.0 / 3, OriginLon: 0.1 + 0.2, TargetLat: -90, TargetLon: 179.99999999999997},
		{OriginLat: 1e21, OriginLon: -1e-300, TargetLat: 123456789.123456789, TargetLon: 1.7976931348623157e308},
	} {
		stored, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		var fromPostgres string
		if err := b.Pool.QueryRow(t.Context(), `SELECT $1::jsonb::text`, string(stored)).Scan(&fromPostgres); err != nil {
			t.Fatal(err)
		}
		if want := string(jsonbSpelling(params)); fromPostgres != want {
			t.Fatalf("Postgres gives %s back as %s, jsonbSpelling as %s", stored, fromPostgres, want)
		}
		if same, err := sameParamsAs(params)([]byte(fromPostgres)); err != nil || !same {
			t.Fatalf("%+v read back from Postgres as %s does not match itself (%v)", params, fromPostgres, err)
		}
	}
}
