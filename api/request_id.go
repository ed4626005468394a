package api

import (
	"crypto/rand"
	"net/http"
	"strings"

	"github.com/rocketrides/rocketrides/internal/requestid"
	"github.com/rocketrides/rocketrides/internal/tracing"
)

// requestIDHeader names a request both ways: a client (or the proxy in front of the API) may send
// one, and every response carries the id its request was served under.
const requestIDHeader = "X-Request-Id"

// requestIDMaxLen bounds an incoming X-Request-Id. 64 characters hold a UUID (36), a prefixed id
// such as ours (30), or a 32-digit trace id with room to spare; a longer one is not an id a
// proxy made, and would let a client lengthen every log line of its requests.
const requestIDMaxLen = 64

// requestIDPrefix marks the ids the API made itself, so that they are not mistaken for ones a
// client sent.
const requestIDPrefix = "req_"

// validRequestID reports whether an incoming id is used as is: 1 to requestIDMaxLen characters
// of [A-Za-z0-9._:-]. That covers UUIDs, ULIDs, hex trace ids and prefixed ids, and keeps out
// spaces, quotes, '=' and control characters, so that the id goes into a log line, a header and
// a JSON body without quoting or escaping, and cannot forge a field of a text log line. An id
// that begins with requestIDPrefix is refused too: that prefix tells whoever reads the log that
// the API made the id, which a client's must never seem to be.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > requestIDMaxLen || strings.HasPrefix(id, requestIDPrefix) {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID makes an id for a request that came without a usable one: 128 random bits,
// base32, behind requestIDPrefix.
func newRequestID() string {
	return requestIDPrefix + rand.Text()
}

// assignRequestID gives every request an id before anything else runs: the client's
// X-Request-Id if it is valid, a new one otherwise (an invalid one is dropped, not repaired).
// The id is set on the response at once, so that every answer echoes it, an error or a
// recovered panic included; it goes into the request's context, so that every line logged
// while serving the request carries it (see internal/requestid), and writeProblem puts it into
// problem bodies.
func (s *Server) assignRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(requestIDHeader, id)
		tracing.SetRequestID(r.Context(), id)
		next.ServeHTTP(w, r.WithContext(requestid.NewContext(r.Context(), id)))
	})
}
