package api

import (
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/phases"
)

func TestParseRideParams(t *testing.T) {
	t.Parallel()

	const (
		form     = "application/x-www-form-urlencoded"
		jsonCT   = "application/json"
		goodForm = "origin_lat=0.0&origin_lon=0.0&target_lat=0.0&target_lon=0.0"
	)
	sf := phases.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863}

	tests := []struct {
		name        string
		contentType string
		body        string
		want        phases.RideParams
		raiseError  bool
		status      int    // 0: valid
		param       string // the parameter the error names
	}{
		{"FormZeros", form, goodForm, phases.RideParams{}, false, 0, ""},
		{"FormIntegersMatchFloats", form, "origin_lat=0&origin_lon=0&target_lat=0&target_lon=0", phases.RideParams{}, false, 0, ""},
		{"JSON", jsonCT, `{"origin_lat":37.7749,"origin_lon":-122.4194,"target_lat":37.3382,"target_lon":-121.8863}`, sf, false, 0, ""},
		{"JSONWithCharset", "application/json; charset=utf-8", `{"origin_lat":37.7749,"origin_lon":-122.4194,"target_lat":37.3382,"target_lon":-121.8863}`, sf, false, 0, ""},
		{"NoContentTypeJSON", "", `{"origin_lat":37.7749,"origin_lon":-122.4194,"target_lat":37.3382,"target_lon":-121.8863}`, sf, false, 0, ""},
		{"Bounds", form, "origin_lat=-90&origin_lon=-180&target_lat=90&target_lon=180", phases.RideParams{OriginLat: -90, OriginLon: -180, TargetLat: 90, TargetLon: 180}, false, 0, ""},
		{"RaiseErrorForm", form, goodForm + "&raise_error=true", phases.RideParams{}, true, 0, ""},
		{"RaiseErrorFalse", form, goodForm + "&raise_error=false", phases.RideParams{}, false, 0, ""},
		{"RaiseErrorJSON", jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0,"raise_error":true}`, phases.RideParams{}, true, 0, ""},

		{"NoParams", form, "", phases.RideParams{}, false, 400, "origin_lat"},
		{"NoParamsNoContentType", "", "", phases.RideParams{}, false, 400, "origin_lat"},
		{"MissingTargetLon", form, "origin_lat=0&origin_lon=0&target_lat=0", phases.RideParams{}, false, 400, "target_lon"},
		{"NotANumber", form, "origin_lat=north&origin_lon=0&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lat"},
		{"NaN", form, "origin_lat=NaN&origin_lon=0&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lat"},
		{"Infinity", form, "origin_lat=0&origin_lon=Inf&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lon"},
		{"Hexadecimal", form, "origin_lat=0x1p4&origin_lon=0&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lat"},
		{"Underscores", form, "origin_lat=1_0&origin_lon=0&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lat"},
		{"Empty", form, "origin_lat=&origin_lon=0&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lat"},
		{"PlusAndTrailingDot", form, "origin_lat=%2B1.&origin_lon=.5&target_lat=-0&target_lon=1e1", phases.RideParams{OriginLat: 1, OriginLon: 0.5, TargetLat: 0, TargetLon: 10}, false, 0, ""},
		{"LatitudeTooHigh", form, "origin_lat=0&origin_lon=0&target_lat=90.0001&target_lon=0", phases.RideParams{}, false, 400, "target_lat"},
		{"LongitudeTooLow", form, "origin_lat=0&origin_lon=-180.5&target_lat=0&target_lon=0", phases.RideParams{}, false, 400, "origin_lon"},
		{"JSONStringNumber", jsonCT, `{"origin_lat":"1","origin_lon":0,"target_lat":0,"target_lon":0}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"JSONNull", jsonCT, `{"origin_lat":null,"origin_lon":0,"target_lat":0,"target_lon":0}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"JSONHugeExponent", jsonCT, `{"origin_lat":1e999,"origin_lon":0,"target_lat":0,"target_lon":0}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"JSONArray", jsonCT, `[1,2,3,4]`, phases.RideParams{}, false, 400, ""},
		{"JSONTwoObjects", jsonCT, `{} {}`, phases.RideParams{}, false, 400, ""},
		{"JSONMalformed", jsonCT, `{"origin_lat":`, phases.RideParams{}, false, 400, ""},
		{"JSONNullBody", jsonCT, `null`, phases.RideParams{}, false, 400, ""},
		{"JSONTrailingBrace", jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0}}`, phases.RideParams{}, false, 400, ""},
		{"JSONTrailingText", jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0} x`, phases.RideParams{}, false, 400, ""},
		{"JSONTrailingWhitespace", jsonCT, "{\"origin_lat\":0,\"origin_lon\":0,\"target_lat\":0,\"target_lon\":0}\n\t ", phases.RideParams{}, false, 0, ""},
		{"JSONRepeatedParam", jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0,"origin_lat":1}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"JSONRepeatedParamSameValue", jsonCT, `{"origin_lat":0,"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"JSONRepeatedParamEscaped", jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0,"origin\u005flat":1}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"JSONRepeatedUnknownParam", jsonCT, `{"tip":1,"tip":2,"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0}`, phases.RideParams{}, false, 400, "tip"},
		{"JSONNestedObject", jsonCT, `{"origin_lat":{"a":1,"a":2},"origin_lon":0,"target_lat":0,"target_lon":0}`, phases.RideParams{}, false, 400, "origin_lat"},
		{"UnknownParam", form, goodForm + "&amount=1", phases.RideParams{}, false, 400, "amount"},
		{"RepeatedParam", form, goodForm + "&origin_lat=1", phases.RideParams{}, false, 400, "origin_lat"},
		{"RepeatedParamEscaped", form, goodForm + "&origin%5Flat=1", phases.RideParams{}, false, 400, "origin_lat"},
		{"RaiseErrorNotBool", form, goodForm + "&raise_error=yes", phases.RideParams{}, false, 400, "raise_error"},
		{"UnsupportedMediaType", "text/plain", goodForm, phases.RideParams{}, false, 415, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, raiseError, apiErr := parseRideParams(tt.contentType, []byte(tt.body))
			if tt.status == 0 {
				if apiErr != nil {
					t.Fatalf("want valid, got %+v", apiErr.problem)
				}
				if got != tt.want || raiseError != tt.raiseError {
					t.Fatalf("want %+v raise_error=%t, got %+v raise_error=%t", tt.want, tt.raiseError, got, raiseError)
				}
				return
			}
			if apiErr == nil {
				t.Fatalf("want %d naming %q, got valid %+v", tt.status, tt.param, got)
			}
			if apiErr.problem.Status != tt.status || apiErr.problem.Param != tt.param {
				t.Fatalf("want %d naming %q, got %d naming %q (%s)", tt.status, tt.param,
					apiErr.problem.Status, apiErr.problem.Param, apiErr.problem.Detail)
			}
			if tt.param != "" && !strings.Contains(apiErr.problem.Detail, tt.param) {
				t.Fatalf("detail %q does not name %s", apiErr.problem.Detail, tt.param)
			}
		})
	}
}
