package api

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// FuzzContractHeaderSyntax holds the contract's schemas of the request headers the API parses
// itself to the code that parses them: for any value, the IdempotencyKey schema accepts it
// exactly when parseIdempotencyKey does, and the ClientRequestId schema exactly when
// validRequestID does. An integrator's client that checks a header against the contract then agrees with the
// server.
func FuzzContractHeaderSyntax(f *testing.F) {
	for _, seed := range idempotencyKeySeeds {
		f.Add(seed)
	}
	for _, seed := range []string{"a", "req_5JRVNSK7BQ2TQEDXJ3KUHGWZ4M", "Root.1:x_y-z", strings.Repeat("x", requestIDMaxLen+1), "a b", "a\n"} {
		f.Add(seed)
	}

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPIDocument)
	if err != nil {
		f.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		f.Fatal(err)
	}
	idempotencyKey := doc.Components.Schemas["IdempotencyKey"].Value
	requestID := doc.Components.Schemas["ClientRequestId"].Value

	f.Fuzz(func(t *testing.T, value string) {
		_, apiErr := parseIdempotencyKey(value)
		schemaErr := idempotencyKey.VisitJSON(value, openapi3.EnableJSONSchema2020())
		if (apiErr == nil) != (schemaErr == nil) {
			serverSays := "valid"
			if apiErr != nil {
				serverSays = apiErr.problem.Detail
			}
			t.Fatalf("Idempotency-Key %q: the server says %s, the contract %v", value, serverSays, schemaErr)
		}

		schemaErr = requestID.VisitJSON(value, openapi3.EnableJSONSchema2020())
		if validRequestID(value) != (schemaErr == nil) {
			t.Fatalf("X-Request-Id %q: the server says valid %t, the contract %v", value, validRequestID(value), schemaErr)
		}
	})
}
