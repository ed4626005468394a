package connguard

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// FuzzFramerAgainstGo feeds the same bytes, one or more requests of one connection, to the framer
// and to Go's own reader used as Go's server uses it, and fails where they frame a request
// differently: where its header section or body ends, whether the connection goes on after it.
// Where the framer refuses a request's syntax (ErrBareLF, ErrBareCR, ErrObsFold), the guard
// answers 400 and the comparison stops there. Go's server also reads the bytes as the guarded
// connection hands them over, cut in pieces of a fuzzed size: it must read the same requests,
// and the connection must hand over nothing past the framer's stop.
func FuzzFramerAgainstGo(f *testing.F) {
	// More in testdata/fuzz/FuzzFramerAgainstGo: bare LF, folded lines, duplicate lengths, chunk
	// extensions and trailers, values padded past any buffer, CRLF after a POST.
	f.Add(keepAliveRequests, uint8(0))
	f.Add("POST /healthz HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\nHost: x\nX: a\n b\n\n", uint8(1))
	f.Add("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n", uint8(5))
	f.Fuzz(func(t *testing.T, input string, piece uint8) {
		reads := serverReads(strings.NewReader(input), input)
		frames := frameAll(input)

		served := 0 // requests the guarded server reads whole
	compare:
		for i, r := range reads {
			if frames.stop < r.headerEnd {
				if frames.err == nil {
					t.Fatalf("request %d: the framer ends the connection at %d, inside a header Go reads to %d", i+1, frames.stop, r.headerEnd)
				}
				break // the guard refuses the request
			}
			if i >= len(frames.headerEnds) || frames.headerEnds[i] != r.headerEnd {
				t.Fatalf("request %d: Go ends the header section at %d, the framer at %v", i+1, r.headerEnd, frames.headerEnds)
			}
			switch {
			case r.bodyErr != nil && errors.Is(r.bodyErr, io.ErrUnexpectedEOF) && i < len(frames.ends):
				t.Fatalf("request %d: the framer ends the body at %d, Go reads on past the input (%v)", i+1, frames.ends[i], r.bodyErr)
			case r.bodyErr != nil:
				break compare // the server closes the connection: Go cannot read the body
			case frames.stop < r.end && frames.err != nil && frames.inTrailer:
				break compare // the guard refuses a trailer's syntax
			case frames.stop < r.end:
				t.Fatalf("request %d: the framer stops at %d (%v), inside a body Go reads to %d", i+1, frames.stop, frames.err, r.end)
			case i >= len(frames.ends) || frames.ends[i] != r.end:
				t.Fatalf("request %d: Go ends the request at %d, the framer at %v", i+1, r.end, frames.ends)
			}
			served = i + 1
			last := frames.closed && frames.stop == r.end
			switch {
			case r.faulty && !last:
				t.Fatalf("request %d: its framing is faulty but the framer reads on", i+1)
			case last && !r.faulty && !r.closes:
				t.Fatalf("request %d: the framer ends a connection the server keeps", i+1)
			case last && frames.closeAfter != int64(i+1):
				t.Fatalf("request %d: the framer ends the connection but names request %d the last", i+1, frames.closeAfter)
			}
			if r.faulty || r.closes {
				break
			}
		}

		var guard framer
		handedOver := &countingReader{r: &framedReader{framer: &guard, r: &pieceReader{r: strings.NewReader(input), piece: int(piece)}}}
		guarded := serverReads(handedOver, input)
		io.Copy(io.Discard, handedOver)
		if handedOver.n != frames.stop {
			t.Fatalf("the guarded connection hands over %d bytes, want %d", handedOver.n, frames.stop)
		}
		whole := 0
		for whole < len(guarded) && guarded[whole].bodyErr == nil {
			whole++
		}
		if whole != served {
			t.Fatalf("the guarded server reads %d requests whole, want %d", whole, served)
		}
		for i := range whole {
			if guarded[i].headerEnd != reads[i].headerEnd || guarded[i].end != reads[i].end {
				t.Fatalf("request %d: the guarded server frames it at %d, %d; Go at %d, %d", i+1, guarded[i].headerEnd, guarded[i].end, reads[i].headerEnd, reads[i].end)
			}
		}
	})
}

// serverRead is a request as Go's server reads it.
type serverRead struct {
	headerEnd int   // where its header section ends
	end       int   // where it ends, if its body was read
	bodyErr   error // why its body could not be read
	faulty    bool  // Transfer-Encoding in HTTP/1.0 or beside Content-Length (RFC 9112 §6.1, §6.3)
	closes    bool  // the server closes the connection after it (Connection: close, HTTP/1.0, PRI *)
}

// serverReads reads a connection's bytes from r as Go's server does (net/http's conn.serve),
// request by request until it would close the connection, each request's handler reading its
// body to the end. input is r's bytes as the client sent them.
func serverReads(r io.Reader, input string) []serverRead {
	counted := &countingReader{r: r}
	br := bufio.NewReader(counted) // 4 KiB, as the server's
	offset := func() int { return counted.n - br.Buffered() }

	var reads []serverRead
	lastMethod := ""
	for {
		if lastMethod == "POST" {
			peek, _ := br.Peek(4)
			br.Discard(len(peek) - len(strings.TrimLeft(string(peek), "\r\n")))
		}
		start := offset()
		if _, err := br.Peek(1); err != nil {
			return reads
		}
		req, err := http.ReadRequest(br)
		if err != nil || !(req.ProtoMajor == 1 || req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*") {
			return reads // the server answers 4xx or 505 and closes
		}
		read := serverRead{headerEnd: offset(), closes: req.Close}
		// Go's reader drops Transfer-Encoding from req.Header; read the header section again.
		tp := textproto.NewReader(bufio.NewReader(strings.NewReader(input[start:read.headerEnd])))
		tp.ReadLine()
		header, _ := tp.ReadMIMEHeader()
		_, encoded := header["Transfer-Encoding"]
		_, hasLength := header["Content-Length"]
		read.faulty = encoded && (!req.ProtoAtLeast(1, 1) || hasLength)

		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			read.bodyErr = err
			return append(reads, read)
		}
		read.end = offset()
		reads = append(reads, read)
		if read.faulty || read.closes {
			return reads
		}
		lastMethod = req.Method
	}
}

// framing is how the framer reads a connection's bytes.
type framing struct {
	headerEnds []int // where each header section ends
	ends       []int // where each request ends
	stop       int   // where the framer stopped: a syntax error, or the end of the last request
	err        error // the syntax error
	closed     bool  // the framer reached the last request's end, or refused its header
	inTrailer  bool  // the syntax error is in a trailer
	closeAfter int64 // the last request, by number
}

// frameAll feeds input to a framer a byte at a time.
func frameAll(input string) framing {
	var f framer
	fr := framing{stop: len(input)}
	for i := range len(input) {
		requests, ended := f.requests, f.ended
		kept, err := f.scan([]byte{input[i]})
		if err != nil {
			fr.stop, fr.err, fr.inTrailer = i, err, f.trailers
			break
		}
		if kept == 0 {
			fr.stop = i
			break
		}
		if f.requests > requests {
			fr.headerEnds = append(fr.headerEnds, i+1)
		}
		if f.ended > ended {
			fr.ends = append(fr.ends, i+1)
		}
	}
	fr.closed, fr.closeAfter = f.state == closed, f.closeAfter.Load()
	return fr
}

// framedReader reads r as a guarded connection reads it.
type framedReader struct {
	framer *framer
	r      io.Reader
}

func (r *framedReader) Read(p []byte) (int, error) { return r.framer.read(r.r, p) }

// pieceReader reads r in pieces of at most piece bytes (0: as much as asked).
type pieceReader struct {
	r     io.Reader
	piece int
}

func (r *pieceReader) Read(p []byte) (int, error) {
	if r.piece > 0 && len(p) > r.piece {
		p = p[:r.piece]
	}
	return r.r.Read(p)
}

type countingReader struct {
	r io.Reader
	n int
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += n
	return n, err
}
