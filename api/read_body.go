package api

import (
	"bytes"
	"io"
	"net/http"
	"time"
)

// bodyReadTimeout bounds reading a booking's body, from when its rider was let in. A ride's
// parameters are under a kilobyte, one TCP segment that usually travels with the headers: 3 s is
// that segment lost and resent twice (a retransmission timeout starts at 1 s and doubles). One
// that trickles its body in is cut off after this, having held its connection and a slot of its
// rider's, but none of the process's (see shedLoad); while it sends, the connection guard may
// close it to make room, as it does a connection still sending its headers.
const bodyReadTimeout = 3 * time.Second

// readBody reads a request's body in full, up to maxBodyBytes, within bodyReadTimeout, before the
// handlers after it run. A body that could not be read is handed on as its error, for the
// handler to answer as it answers any bad body.
func (s *Server) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) // unsupported only in tests' recorders
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		_ = rc.SetReadDeadline(time.Time{})
		if err != nil {
			r.Body = io.NopCloser(failingReader{err})
		} else {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }
