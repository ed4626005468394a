package stripeclient

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// knownLength sends each request whose body is held in memory with its Content-Length.
// stripe-go makes a request without a body and sets one afterwards, with GetBody, for each try
// (BackendImplementation.NewRequest, then resetBodyReader); its ContentLength stays 0, which
// net/http reads as a body of unknown length, and sends chunked: three writes a request rather
// than one. The body is a few hundred bytes of form, cheap to read here.
type knownLength struct{ next http.RoundTripper }

func (t knownLength) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength != 0 || req.GetBody == nil {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("error reading the body of a Stripe request: %w", err)
	}
	sized := *req // a RoundTripper must not change the request it was given
	sized.ContentLength = int64(len(body))
	sized.GetBody = func() (io.ReadCloser, error) {
		if len(body) == 0 {
			return http.NoBody, nil
		}
		return io.NopCloser(bytes.NewReader(body)), nil
	}
	sized.Body, _ = sized.GetBody()
	return t.next.RoundTrip(&sized)
}
