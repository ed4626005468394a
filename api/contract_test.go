package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// contractFile is the API's OpenAPI document, the file that api/openapi.go embeds.
const contractFile = "openapi.yaml"

// openAPIContract is the API's OpenAPI document, loaded and validated, with a router that
// finds the operation a request is for.
type openAPIContract struct {
	doc    *openapi3.T
	router routers.Router

	// requestID is the RequestId schema's pattern, which both the X-Request-Id header and a
	// problem's request_id must match.
	requestID *regexp.Regexp

	// conforming holds the answers found to conform so far, each as answerKey writes it, so
	// that a flood of identical answers (a thousand health checks, say) is validated once:
	// kin-openapi compiles a JSON Schema 2020-12 validator for every header and body it checks,
	// which costs milliseconds an answer under -race.
	conforming sync.Map
}

// loadedContract loads the contract once for every test of the package: doRequest validates
// each response against it.
var loadedContract = sync.OnceValues(func() (*openAPIContract, error) {
	data, err := os.ReadFile(contractFile)
	if err != nil {
		return nil, fmt.Errorf("error reading the contract: %w", err)
	}
	return parseContract(data)
})

// parseContract loads an OpenAPI document and checks that it is a valid OpenAPI 3.1 one.
func parseContract(data []byte) (*openAPIContract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("error loading the contract: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("the contract is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the contract is not a valid OpenAPI document: %w", err)
	}
	// The document's servers entry names where a development stack listens; the tests' servers
	// listen elsewhere, and a router built with it would match none of their requests.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("error routing the contract's paths: %w", err)
	}
	requestID, err := regexp.Compile(doc.Components.Schemas["RequestId"].Value.Pattern)
	if err != nil {
		return nil, fmt.Errorf("error compiling the RequestId pattern: %w", err)
	}
	return &openAPIContract{doc: doc, router: router, requestID: requestID}, nil
}

// contract returns the API's contract, failing t if it does not load.
func contract(t *testing.T) *openAPIContract {
	t.Helper()
	c, err := loadedContract()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requireConforms fails t unless the response status, header and body, the answer to req,
// is one that the contract allows: a status the operation lists, with the headers that status
// requires, of the media type and schema it gives.
func (c *openAPIContract) requireConforms(t *testing.T, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	key, cacheable := c.answerKey(req, status, header, body)
	if _, seen := c.conforming.Load(key); cacheable && seen {
		return
	}
	if err := c.validateResponse(t.Context(), req, status, header, body); err != nil {
		t.Fatalf("the answer to %s %s departs from api/%s: %s\n%d %v\n%s",
			req.Method, req.URL.Path, contractFile, err, status, header, body)
	}
	if cacheable {
		c.conforming.Store(key, true)
	}
}

// contractRequestID stands for the request id in answerKey.
const contractRequestID = "req_CONTRACT"

// answerKey writes an answer as a key of conforming: everything the validation looks at, with
// the request id, which differs in every answer, replaced by contractRequestID in the header and
// in a problem's request_id, and without Date. An answer conforms exactly when its key's answer
// does, provided that its request id matches RequestId (the contract gives the header and
// request_id that one schema); an answer whose id does not is not cacheable.
func (c *openAPIContract) answerKey(req *http.Request, status int, header http.Header, body []byte) (string, bool) {
	id := header.Get("X-Request-Id")
	if len(header.Values("X-Request-Id")) != 1 || !c.requestID.MatchString(id) {
		return "", false
	}
	h := header.Clone()
	h.Set("X-Request-Id", contractRequestID)
	h.Del("Date")
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d\n", req.Method, req.URL.RequestURI(), status)
	_ = h.Write(&b) // a strings.Builder does not fail
	b.WriteString("\n")
	b.Write(bytes.ReplaceAll(body, []byte(`"request_id":"`+id+`"`), []byte(`"request_id":"`+contractRequestID+`"`)))
	return b.String(), true
}

// validateResponse checks a response against the contract. A request that reaches no
// operation, an unknown path or a method its path does not take, must be answered by the
// document's NotFound or MethodNotAllowed response, which no operation can list.
func (c *openAPIContract) validateResponse(ctx context.Context, req *http.Request, status int, header http.Header, body []byte) error {
	route, pathParams, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		route = c.unroutedRoute(req, http.StatusNotFound, "NotFound")
	case errors.Is(err, routers.ErrMethodNotAllowed):
		route = c.unroutedRoute(req, http.StatusMethodNotAllowed, "MethodNotAllowed")
	case err != nil:
		return fmt.Errorf("error finding the operation: %w", err)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: pathParams,
			Route:      route,
		},
		Status: status,
		Header: header,
		Options: &openapi3filter.Options{
			// A status the operation does not list is a departure too.
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	input.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(ctx, input)
}

// unroutedRoute is a stand-in operation for a request that matches none, whose one response is
// the document's component response named name, with status.
func (c *openAPIContract) unroutedRoute(req *http.Request, status int, name string) *routers.Route {
	return &routers.Route{
		Spec:   c.doc,
		Path:   req.URL.Path,
		Method: req.Method,
		Operation: &openapi3.Operation{
			Responses: openapi3.NewResponses(openapi3.WithStatus(status, &openapi3.ResponseRef{
				Ref:   "#/components/responses/" + name,
				Value: c.doc.Components.Responses[name].Value,
			})),
		},
	}
}

// TestContractCatchesDepartures checks that the validation doRequest relies on does fail: each
// answer below departs from the contract in one way, next to a conforming one of the same kind.
func TestContractCatchesDepartures(t *testing.T) {
	t.Parallel()
	c := contract(t)

	ride := `{"id":"4611686018427387904","origin_lat":37.7749,"origin_lon":-122.4194,"target_lat":37.3382,` +
		`"target_lon":-121.8863,"stripe_charge_id":"ch_1","created_at":"2026-01-02T03:04:05.123456Z"}`
	created := `{"message":"Ride booked and paid.","ride":` + ride + `}`
	problemBody := func(status int, code string, extra string) string {
		return fmt.Sprintf(`{"type":"https://rocketrides.example/problems/%s","title":"T","status":%d,"detail":"D",`+
			`"code":"%s","request_id":"req_X"%s}`, code, status, code, extra)
	}
	headers := func(contentType string, more ...string) http.Header {
		h := http.Header{"Content-Type": {contentType}, "X-Request-Id": {"req_X"},
			"Cache-Control": {"no-store"}, "X-Content-Type-Options": {"nosniff"}}
		for i := 0; i < len(more); i += 2 {
			h.Set(more[i], more[i+1])
		}
		return h
	}
	const (
		jsonType    = "application/json"
		problemType = "application/problem+json"
	)

	tests := []struct {
		name         string
		method, path string
		status       int
		header       http.Header
		body         string
		conforms     bool
	}{
		{"Created", "POST", "/rides", 201, headers(jsonType), created, true},
		{"CreatedReplayed", "POST", "/rides", 201, headers(jsonType, "Idempotent-Replayed", "true"), created, true},
		{"CreatedRideIdAsNumber", "POST", "/rides", 201, headers(jsonType),
			strings.Replace(created, `"id":"4611686018427387904"`, `"id":4611686018427387904`, 1), false},
		{"CreatedUnchargedRide", "POST", "/rides", 201, headers(jsonType),
			strings.Replace(created, `"ch_1"`, `null`, 1), false},
		{"CreatedWithAnUndescribedMember", "POST", "/rides", 201, headers(jsonType),
			strings.Replace(created, `"message"`, `"pilot":"Ada","message"`, 1), false},
		{"CreatedWithoutRequestId", "POST", "/rides", 201, func() http.Header {
			h := headers(jsonType)
			h.Del("X-Request-Id")
			return h
		}(), created, false},
		{"CreatedCacheable", "POST", "/rides", 201, headers(jsonType, "Cache-Control", "max-age=60"), created, false},
		{"ReplayedNotTrue", "POST", "/rides", 201, headers(jsonType, "Idempotent-Replayed", "yes"), created, false},
		{"CreatedAsProblem", "POST", "/rides", 201, headers(problemType), created, false},
		{"UndescribedStatus", "POST", "/rides", 418, headers(problemType), problemBody(418, "internal_error", ""), false},

		{"KeyInUse", "POST", "/rides", 409, headers(problemType, "Retry-After", "1"), problemBody(409, "idempotency_key_in_use", ""), true},
		{"KeyInUseWithoutRetryAfter", "POST", "/rides", 409, headers(problemType), problemBody(409, "idempotency_key_in_use", ""), false},
		{"KeyInUseRetryAfterADate", "POST", "/rides", 409, headers(problemType, "Retry-After", "Fri, 31 Dec 1999 23:59:59 GMT"),
			problemBody(409, "idempotency_key_in_use", ""), false},
		{"Declined", "POST", "/rides", 402, headers(problemType), problemBody(402, "card_declined", `,"decline_code":"insufficient_funds"`), true},
		{"DeclinedWithAnotherStatusCode", "POST", "/rides", 402, headers(problemType), problemBody(402, "booking_rate_limited", ""), false},
		{"ProblemStatusNotTheResponses", "POST", "/rides", 402, headers(problemType), problemBody(400, "card_declined", ""), false},
		{"ProblemWithoutRequestId", "POST", "/rides", 402, headers(problemType),
			strings.Replace(problemBody(402, "card_declined", ""), `,"request_id":"req_X"`, "", 1), false},
		{"ProblemWithAnUnknownCode", "POST", "/rides", 400, headers(problemType), problemBody(400, "bad_request", ""), false},
		{"ProblemAsJSON", "POST", "/rides", 400, headers(jsonType), problemBody(400, "invalid_parameter", ""), false},

		{"Ride", "GET", "/rides/42", 200, headers(jsonType), `{"ride":` + strings.Replace(ride, `"ch_1"`, `null`, 1) + `}`, true},
		{"RideWithoutChargeMember", "GET", "/rides/42", 200, headers(jsonType),
			`{"ride":` + strings.Replace(ride, `,"stripe_charge_id":"ch_1"`, ``, 1) + `}`, false},
		{"RideRateLimitedWithoutRetryAfter", "GET", "/rides/42", 429, headers(problemType), problemBody(429, "read_rate_limited", ""), false},
		{"Unauthorized", "GET", "/rides/42", 401, headers(problemType, "WWW-Authenticate", `Bearer realm="rocket-rides"`),
			problemBody(401, "unauthorized", ""), true},
		{"UnauthorizedWithoutChallenge", "GET", "/rides/42", 401, headers(problemType), problemBody(401, "unauthorized", ""), false},

		{"Healthy", "GET", "/healthz", 200, headers(jsonType), `{"status":"ok"}`, true},
		{"HealthyInOtherWords", "GET", "/healthz", 200, headers(jsonType), `{"status":"up"}`, false},
		{"HealthyAsText", "GET", "/healthz", 200, headers("text/plain"), `ok`, false},
		{"Document", "GET", "/openapi.yaml", 200, headers("application/yaml"), "openapi: 3.1.0\ninfo: {}\npaths: {}\n", true},
		{"DocumentOfAnotherVersion", "GET", "/openapi.yaml", 200, headers("application/yaml"), "openapi: 3.0.3\ninfo: {}\npaths: {}\n", false},

		{"MethodNotAllowed", "DELETE", "/healthz", 405, headers(problemType, "Allow", "GET"), problemBody(405, "method_not_allowed", ""), true},
		{"MethodNotAllowedWithoutAllow", "DELETE", "/healthz", 405, headers(problemType), problemBody(405, "method_not_allowed", ""), false},
		{"NotFound", "GET", "/nowhere", 404, headers(problemType), problemBody(404, "not_found", ""), true},
		{"NowhereButNot404", "GET", "/nowhere", 405, headers(problemType, "Allow", "GET"), problemBody(405, "method_not_allowed", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tt.method, tt.path, nil)
			err := c.validateResponse(t.Context(), req, tt.status, tt.header, []byte(tt.body))
			if tt.conforms && err != nil {
				t.Fatalf("want the answer to conform, got %s", err)
			}
			if !tt.conforms && err == nil {
				t.Fatal("want the departure from the contract caught, got no error")
			}
		})
	}
}
