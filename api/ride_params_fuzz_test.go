package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"github.com/rocketrides/rocketrides/phases"
)

// FuzzParseRideParams feeds the body parser any content type and body. Whatever it accepts
// must be a ride request: four finite coordinates in range, which re-encoded as JSON and as a
// form parse back to the very same request; an accepted JSON body must be JSON, and the
// standard decoder must read the same values from it; an accepted form must be a form with
// every name once. Whatever it refuses must be a 400 or 415 that says why.
func FuzzParseRideParams(f *testing.F) {
	const form, jsonCT = "application/x-www-form-urlencoded", "application/json"
	for _, seed := range []struct{ contentType, body string }{
		{jsonCT, testJSONBody},
		{jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0,"raise_error":true}`},
		{jsonCT, `{"origin_lat":-90,"origin_lon":-180,"target_lat":90,"target_lon":180}`},
		{jsonCT, `{"origin_lat":1e-320,"origin_lon":-0,"target_lat":0.1e2,"target_lon":1E+2}`},
		{jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0,"origin\u005flat":1}`},
		{jsonCT, `{"origin_lat":0,"origin_lon":0,"target_lat":0,"target_lon":0}}`},
		{jsonCT, `{"origin_lat":{"a":[1,{"b":null}]},"origin_lon":"0","target_lat":0,"target_lon":0}`},
		{"application/json; charset=utf-8", ` {"origin_lat":1,"origin_lon":2,"target_lat":3,"target_lon":4} ` + "\n"},
		{"", `{"origin_lat":1,"origin_lon":2,"target_lat":3,"target_lon":4}`},
		{"", ""},
		{form, "origin_lat=0.0&origin_lon=0.0&target_lat=0.0&target_lon=0.0"},
		{form, "origin_lat=%2B1.&origin_lon=.5&target_lat=-0&target_lon=1e1&raise_error=false"},
		{form, "origin_lat=1&origin%5Flat=2&origin_lon=0&target_lat=0&target_lon=0"},
		{form, "origin_lat=NaN&origin_lon=Inf&target_lat=0x1p4&target_lon=1_0"},
		{form, "origin_lat=%zz"},
		{"text/plain", "origin_lat=0"},
		{"application/json; charset", "{}"},
	} {
		f.Add(seed.contentType, []byte(seed.body))
	}

	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		params, raiseError, apiErr := parseRideParams(contentType, body)
		if apiErr != nil {
			p := apiErr.problem
			if (p.Status != http.StatusBadRequest && p.Status != http.StatusUnsupportedMediaType) || p.Code == "" || p.Detail == "" {
				t.Fatalf("want a 400 or 415 saying why, got %+v", p)
			}
			return
		}

		requireRideParams(t, params)

		// Re-encoded, the request parses back to itself, as JSON and as a form.
		for name, reencoded := range map[string]struct{ contentType, body string }{
			"JSON": {"application/json", rideParamsJSON(params, raiseError)},
			"form": {"application/x-www-form-urlencoded", rideParamsForm(params, raiseError)},
		} {
			again, againRaise, apiErr := parseRideParams(reencoded.contentType, []byte(reencoded.body))
			if apiErr != nil || again != params || againRaise != raiseError {
				t.Fatalf("%s %q re-encoded as %s %q: want %+v raise_error=%t back, got %+v %t %v",
					contentType, body, name, reencoded.body, params, raiseError, again, againRaise, apiErr)
			}
		}

		// Checked against the standard library's own reading of the body.
		mediaType, _, _ := mime.ParseMediaType(contentType)
		if mediaType == "application/json" || (contentType == "" && len(bytes.TrimSpace(body)) > 0) {
			var std map[string]any
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber()
			if !json.Valid(body) || dec.Decode(&std) != nil {
				t.Fatalf("accepted a JSON body that is not one JSON object: %q", body)
			}
			if stdParams, stdRaise, apiErr := validateRideParams(std); apiErr != nil || stdParams != params || stdRaise != raiseError {
				t.Fatalf("the standard decoder reads %q as %+v %t %v, we as %+v %t", body, stdParams, stdRaise, apiErr, params, raiseError)
			}
			return
		}
		values, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("accepted a form body that is not a form: %q", body)
		}
		for name, vs := range values {
			if len(vs) != 1 {
				t.Fatalf("accepted a form body with %s given %d times: %q", name, len(vs), body)
			}
		}
	})
}

// jsonNumber is JSON's number syntax (RFC 8259, section 6).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzFormAgainstJSON sends the same four coordinates, as any text, in a form body and in a
// JSON body. A request is one request however it is sent: numbers in JSON's syntax are accepted
// both ways or neither, whatever both accept they read as the same parameters (a form forgives
// more, "+1" or ".5", but never reads a number differently), and the parameters as the phases
// store them (JSON) compare equal to either.
func FuzzFormAgainstJSON(f *testing.F) {
	f.Add("37.7749", "-122.4194", "37.3382", "-121.8863")
	f.Add("0", "0.0", "-0", "0e5")
	f.Add("90", "-180", "-90.000", "180e0")
	f.Add("1e-320", "4.9e-324", "2.2250738585072014e-308", "0.1")
	f.Add("+1", ".5", "5.", "1E+2")
	f.Add("179.99999999999999999999", "89.999999999999999999999", "1", "1")
	f.Add("NaN", "Inf", "0x10", "1_0")
	f.Add("90.0000000000000001", "180.00000000000001", "-90.00000000000001", "1")
	f.Add(`0,"origin_lat":1`, "0", "0", "0")

	f.Fuzz(func(t *testing.T, originLat, originLon, targetLat, targetLon string) {
		texts := [4]string{originLat, originLon, targetLat, targetLon}
		jsonBody, formBody := "{", url.Values{}
		for i, name := range rideParamNames {
			if i > 0 {
				jsonBody += ","
			}
			jsonBody += strconv.Quote(name) + ":" + texts[i]
			formBody.Set(name, texts[i])
		}
		jsonBody += "}"

		fromJSON, _, jsonErr := parseRideParams("application/json", []byte(jsonBody))
		fromForm, _, formErr := parseRideParams("application/x-www-form-urlencoded", []byte(formBody.Encode()))

		allJSONNumbers := true
		for _, text := range texts {
			allJSONNumbers = allJSONNumbers && jsonNumber.MatchString(text)
		}
		if allJSONNumbers && (jsonErr == nil) != (formErr == nil) {
			t.Fatalf("the same numbers accepted one way and not the other: JSON %s: %v, form %s: %v",
				jsonBody, jsonErr, formBody.Encode(), formErr)
		}
		if jsonErr != nil || formErr != nil {
			return
		}
		if fromJSON != fromForm {
			t.Fatalf("one request, two readings: JSON %s is %+v, the form is %+v", jsonBody, fromJSON, fromForm)
		}

		// As the phases store and compare them: the parameters encoded as JSON and decoded
		// again, compared as numbers.
		stored, err := json.Marshal(fromForm)
		if err != nil {
			t.Fatal(err)
		}
		var decoded phases.RideParams
		if err := json.Unmarshal(stored, &decoded); err != nil || decoded != fromJSON {
			t.Fatalf("stored as %s, read back as %+v %v; the JSON request is %+v", stored, decoded, err, fromJSON)
		}
	})
}

// requireRideParams checks that params are a ride's: finite and within range.
func requireRideParams(t *testing.T, params phases.RideParams) {
	t.Helper()
	for _, c := range []struct {
		name  string
		value float64
		limit float64
	}{
		{"origin_lat", params.OriginLat, 90}, {"origin_lon", params.OriginLon, 180},
		{"target_lat", params.TargetLat, 90}, {"target_lon", params.TargetLon, 180},
	} {
		if math.IsNaN(c.value) || math.IsInf(c.value, 0) || c.value < -c.limit || c.value > c.limit {
			t.Fatalf("accepted %s = %v, outside [%v, %v]", c.name, c.value, -c.limit, c.limit)
		}
	}
}

// rideParamsJSON and rideParamsForm encode params as a client would, in the shortest decimal
// that reads back as the same number.
func rideParamsJSON(params phases.RideParams, raiseError bool) string {
	body, _ := json.Marshal(params) // finite numbers always encode
	if raiseError {
		body = append(body[:len(body)-1], `,"raise_error":true}`...)
	}
	return string(body)
}

func rideParamsForm(params phases.RideParams, raiseError bool) string {
	values := url.Values{}
	for i, v := range []float64{params.OriginLat, params.OriginLon, params.TargetLat, params.TargetLon} {
		values.Set(rideParamNames[i], strconv.FormatFloat(v, 'g', -1, 64))
	}
	if raiseError {
		values.Set(paramRaiseError, fmt.Sprint(raiseError))
	}
	return values.Encode()
}

const testJSONBody = `{"origin_lat": 37.7749, "origin_lon": -122.4194, "target_lat": 37.3382, "target_lon": -121.8863}`
