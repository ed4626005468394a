package fakestripe

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// checkParams rejects a parameter the endpoint does not know, as Stripe does, so that a typo in
// a caller fails here as it would in production instead of being silently ignored. known lists
// top-level names; "metadata" covers every "metadata[...]".
func checkParams(params url.Values, known []string) *apiError {
	names := make([]string, 0, len(params))
	for key := range params {
		names = append(names, key)
	}
	slices.Sort(names) // report the same parameter every time
	for _, key := range names {
		name, _, _ := strings.Cut(key, "[")
		if !slices.Contains(known, name) {
			return unknownParam(key)
		}
	}
	return nil
}

// intParam reads an optional integer parameter; ok is false when it is absent.
func intParam(params url.Values, name string) (n int64, ok bool, e *apiError) {
	if !params.Has(name) {
		return 0, false, nil
	}
	v := params.Get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, invalidRequest("parameter_invalid_integer", name, "Invalid integer: "+v)
	}
	return n, true, nil
}

// boolParam reads an optional boolean parameter, def when absent.
func boolParam(params url.Values, name string, def bool) (bool, *apiError) {
	if !params.Has(name) {
		return def, nil
	}
	switch v := params.Get(name); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, invalidRequest("", name, "Invalid boolean: "+v)
	}
}

// metadataParam collects "metadata[key]=value" pairs. Stripe drops keys set to the empty string,
// which is how a client unsets one.
func metadataParam(params url.Values) map[string]string {
	metadata := make(map[string]string)
	for key, values := range params {
		inner, ok := strings.CutPrefix(key, "metadata[")
		if !ok {
			continue
		}
		name, ok := strings.CutSuffix(inner, "]")
		if !ok || name == "" || values[0] == "" {
			continue
		}
		metadata[name] = values[0]
	}
	return metadata
}
