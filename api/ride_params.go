package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/phases"
)

// maxBodyBytes caps a request body. A ride request is under 200 bytes; anything near this is
// not a ride request.
const maxBodyBytes = 64 << 10

// rideParamNames are the required parameters, in the order they are checked and reported.
var rideParamNames = []string{"origin_lat", "origin_lon", "target_lat", "target_lon"}

// paramRaiseError is the demo parameter that makes a request fail after ride_created.
const paramRaiseError = "raise_error"

// rawRideParams are the parameters as sent, before they are checked: a JSON body's values as
// decoded (json.Number for numbers), a form body's as formValue.
type rawRideParams map[string]any

// formValue is a parameter from a form body, where every value is text. It is kept apart from
// a JSON string, which is not accepted where a number is due.
type formValue string

// parseRideParams decodes and validates a ride request body, which is JSON or, as in the
// original's curl example, application/x-www-form-urlencoded.
func parseRideParams(contentType string, body []byte) (phases.RideParams, bool, *apiError) {
	raw, apiErr := decodeRideParams(contentType, body)
	if apiErr != nil {
		return phases.RideParams{}, false, apiErr
	}
	return validateRideParams(raw)
}

func decodeRideParams(contentType string, body []byte) (rawRideParams, *apiError) {
	// No Content-Type at all is an error to mime, and an empty mediaType here.
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil && contentType != "" {
		return nil, errUnsupportedMediaType(contentType)
	}

	switch {
	case mediaType == "application/x-www-form-urlencoded" || (mediaType == "" && len(bytes.TrimSpace(body)) == 0):
		values, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, errInvalidParameter("", "The form body could not be parsed: "+err.Error())
		}
		raw := rawRideParams{}
		for name, vs := range values {
			if len(vs) > 1 {
				return nil, errInvalidParameter(name, fmt.Sprintf("%s was given more than once.", name))
			}
			raw[name] = formValue(vs[0])
		}
		return raw, nil
	case mediaType == "application/json" || mediaType == "":
		return decodeJSONObject(body)
	default:
		return nil, errUnsupportedMediaType(contentType)
	}
}

// decodeJSONObject decodes a JSON body, which must be one object, member by member, so that a
// name given twice is refused as it is in a form body. Decoding into a map would keep the last
// value silently, and a client (or a proxy that rewrote the body) that meant the first would
// book a ride it did not ask for. Names are compared decoded, so "origin_lat" and
// "origin\u005flat" are the same name, as they are to every JSON parser.
func decodeJSONObject(body []byte) (rawRideParams, *apiError) {
	notAnObject := errInvalidParameter("", "The body must be one JSON object.")
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notAnObject
	}
	raw := rawRideParams{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notAnObject
		}
		name := tok.(string) // inside an object, the decoder yields only names here
		var value any
		if err := dec.Decode(&value); err != nil {
			return nil, notAnObject
		}
		if _, ok := raw[name]; ok {
			return nil, errInvalidParameter(name, fmt.Sprintf("%s was given more than once.", name))
		}
		raw[name] = value
	}
	// The closing brace, then nothing but whitespace.
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, notAnObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notAnObject
	}
	return raw, nil
}

func errUnsupportedMediaType(contentType string) *apiError {
	return newError(http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType, "Unsupported media type",
		fmt.Sprintf("Content-Type %q is not supported; send application/json or application/x-www-form-urlencoded.", contentType))
}

// validateRideParams checks every parameter, reporting the first problem by name.
func validateRideParams(raw rawRideParams) (phases.RideParams, bool, *apiError) {
	var values [4]float64
	for i, name := range rideParamNames {
		v, ok := raw[name]
		if !ok {
			return phases.RideParams{}, false, errInvalidParameter(name, name+" is required.")
		}
		f, apiErr := parseCoordinate(name, v)
		if apiErr != nil {
			return phases.RideParams{}, false, apiErr
		}
		values[i] = f
	}

	raiseError := false
	if v, ok := raw[paramRaiseError]; ok {
		switch v {
		case true, formValue("true"):
			raiseError = true
		case false, formValue("false"):
		default:
			return phases.RideParams{}, false, errInvalidParameter(paramRaiseError, "raise_error must be true or false.")
		}
	}

	for name := range raw {
		if name != paramRaiseError && !slices.Contains(rideParamNames, name) {
			return phases.RideParams{}, false, errInvalidParameter(name, fmt.Sprintf("%s is not a known parameter.", name))
		}
	}

	return phases.RideParams{OriginLat: values[0], OriginLon: values[1], TargetLat: values[2], TargetLon: values[3]}, raiseError, nil
}

// decimalNumber is the syntax a coordinate may have: JSON's number syntax, with a leading "+" and
// a bare leading or trailing "." forgiven for form bodies. strconv.ParseFloat alone would also
// accept "NaN", "Inf", hexadecimal and underscores.
var decimalNumber = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// parseCoordinate checks one coordinate: a finite number within the range of its kind.
func parseCoordinate(name string, v any) (float64, *apiError) {
	var text string
	switch v := v.(type) {
	case json.Number:
		text = v.String()
	case formValue:
		text = string(v)
	default:
		return 0, errInvalidParameter(name, name+" must be a number.")
	}
	if !decimalNumber.MatchString(text) {
		return 0, errInvalidParameter(name, name+" must be a decimal number.")
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, errInvalidParameter(name, name+" must be a finite number.")
	}

	limit := 180.0
	if name == "origin_lat" || name == "target_lat" {
		limit = 90
	}
	if f < -limit || f > limit {
		return 0, errInvalidParameter(name, fmt.Sprintf("%s must be between %g and %g.", name, -limit, limit))
	}
	return f, nil
}
