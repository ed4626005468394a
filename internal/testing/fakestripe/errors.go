package fakestripe

import (
	"fmt"
	"net/http"
	"strings"
)

// Stripe's error types, the "type" of the error object. stripe-go v76 knows exactly these four
// and wraps each in its own typed error (*stripe.CardError and so on) under *stripe.Error.
const (
	errorTypeAPI            = "api_error"
	errorTypeCard           = "card_error"
	errorTypeIdempotency    = "idempotency_error"
	errorTypeInvalidRequest = "invalid_request_error"
)

// apiError is Stripe's error object, the value under "error" in the body of every non-2xx
// answer. stripe-go decodes it into *stripe.Error and adds the HTTP status, so status travels
// beside it rather than in it.
type apiError struct {
	status int

	Type        string `json:"type"`
	Code        string `json:"code,omitempty"`
	DeclineCode string `json:"decline_code,omitempty"`
	DocURL      string `json:"doc_url,omitempty"`
	Message     string `json:"message"`
	Param       string `json:"param,omitempty"`
	Charge      string `json:"charge,omitempty"`
}

// newAPIError builds an error object, with the doc_url Stripe attaches to every coded error.
func newAPIError(status int, typ, code, param, message string) *apiError {
	e := &apiError{status: status, Type: typ, Code: code, Param: param, Message: message}
	if code != "" {
		e.DocURL = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	return e
}

func invalidRequest(code, param, message string) *apiError {
	return newAPIError(http.StatusBadRequest, errorTypeInvalidRequest, code, param, message)
}

func missingParam(param string) *apiError {
	return invalidRequest("parameter_missing", param, fmt.Sprintf("Missing required param: %s.", param))
}

func unknownParam(param string) *apiError {
	return invalidRequest("parameter_unknown", param, "Received unknown parameter: "+param)
}

// noSuchResource is Stripe's answer to an ID that names nothing: 400 when the ID came in as a
// parameter, 404 when it is the resource in the URL.
func noSuchResource(status int, resource, param, id string) *apiError {
	return newAPIError(status, errorTypeInvalidRequest, "resource_missing", param,
		fmt.Sprintf("No such %s: '%s'", resource, id))
}

// cardDeclined is the 402 a declining card gets. chargeID names the failed charge Stripe records
// for the attempt, empty when the decline happened while attaching the card to a customer.
func cardDeclined(chargeID string) *apiError {
	e := newAPIError(http.StatusPaymentRequired, errorTypeCard, "card_declined", "", "Your card was declined.")
	e.DeclineCode = "generic_decline"
	e.Charge = chargeID
	return e
}

// authenticationFailed is what Stripe answers a missing or wrong secret key with: HTTP 401 with
// type invalid_request_error (Stripe has no separate authentication type on the wire, and
// stripe-go v76 has no typed error for it either, so callers see *stripe.InvalidRequestError
// with HTTPStatusCode 401).
func authenticationFailed(key string) *apiError {
	message := "You did not provide an API key. You need to provide your API key in the " +
		"Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."
	if key != "" {
		message = "Invalid API Key provided: " + redactKey(key)
	}
	return newAPIError(http.StatusUnauthorized, errorTypeInvalidRequest, "", "", message)
}

// redactKey hides all but the last four characters of a key, as Stripe does when it echoes one.
func redactKey(key string) string {
	const shown = 4
	prefix := ""
	for _, p := range []string{"sk_test_", "sk_live_", "rk_test_", "rk_live_", "pk_test_", "pk_live_"} {
		if strings.HasPrefix(key, p) {
			prefix = p
			break
		}
	}
	rest := key[len(prefix):]
	if len(rest) <= shown {
		return prefix + strings.Repeat("*", len(rest))
	}
	return prefix + strings.Repeat("*", len(rest)-shown) + rest[len(rest)-shown:]
}

// internalError is the 500 of an error_500 fault, worded as Stripe words its own.
func internalError() *apiError {
	return newAPIError(http.StatusInternalServerError, errorTypeAPI, "", "",
		"An unknown error occurred. Please try again later.")
}
