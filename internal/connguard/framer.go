package connguard

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Errors of a request's syntax that the server would otherwise accept. Go's server reads past
// them (it joins a folded line to the one before, and ends a line at a bare LF), but a proxy in
// front of it may read the same bytes differently, and where two readers disagree on where a
// request ends, one client's bytes can be served as another's request. Read returns the bytes
// before the error and then the error, and the server answers 400 and closes the connection.
var (
	ErrBareLF  = errors.New("connguard: a line of the request ends in LF without CR (RFC 9112 §2.2)")
	ErrBareCR  = errors.New("connguard: a CR in the request is not followed by LF (RFC 9112 §2.2)")
	ErrObsFold = errors.New("connguard: a header line is folded onto the next (obs-fold, RFC 9112 §5.2)")
)

// ErrBadChunk is a chunked body that the server refuses too: a chunk-size line that is not hex,
// or chunk data not followed by CRLF. Read fails there, so that the handler reading the body
// fails at once and the connection ends.
var ErrBadChunk = errors.New("connguard: a chunk of the body is malformed (RFC 9112 §7.1)")

type frameState int

const (
	inLine         frameState = iota // a line of a header section: request line, field or trailer
	inBody                           // a Content-Length body: remaining bytes
	inChunkSize                      // a chunk-size line
	inChunkData                      // chunk data: remaining bytes
	inChunkDataEnd                   // the CRLF after chunk data: crlfSeen of its bytes read
	closed                           // past the last request the connection carries
)

// framer follows a connection's bytes in the order the server reads them, request by request,
// checking each header section's lines (and a chunked body's trailers) for ErrBareLF, ErrBareCR
// and ErrObsFold. It frames each body as Go's server does, so that it knows where the next
// request begins: Transfer-Encoding: chunked from HTTP/1.1 on, else Content-Length, else none.
//
// A request whose framing is faulty is the last the connection carries: Transfer-Encoding in
// HTTP/1.0, which Go's server ignores (RFC 9112 §6.1), or beside Content-Length, which it
// overrides (§6.3). The handler answers it with Connection: close, so that what a proxy framed
// differently is never read as a request. A request the server refuses without reading its body
// (an unknown transfer coding, a malformed length or version) is the last too. Past the last
// request, the framer hands the server nothing.
type framer struct {
	state     frameState
	trailers  bool   // inLine: the lines are a chunked body's trailers, not a request's header
	lineNo    int    // inLine: lines read of this section; 0 is the request line
	lineLen   int    // the current line's length so far, without its CRLF
	sawCR     bool   // the last byte was a CR
	remaining uint64 // inBody, inChunkData: bytes left
	crlfSeen  int    // inChunkDataEnd: of the CRLF
	skipCRLF  int    // bytes the server looks at for CR or LF to skip before a request line

	req   request   // the request being read
	field field     // the current field line of its header section
	chunk chunkSize // the current chunk-size line

	requests int // header sections read
	ended    int // requests read to their end
	answers  int // requests answered with the connection kept open

	err        error        // sticky: once broken, every later read fails alike
	closeAfter atomic.Int64 // the number of the last request the connection carries; 0 while unknown
}

// request is what the framer keeps of the request being read.
type request struct {
	spaces        int        // request line: spaces read, up to the two around its target
	method        clip       // request line: before the first space
	proto         clip       // request line: after the second space
	lengths       int        // Content-Length fields
	length        fieldValue // the first of them
	lengthsDiffer bool
	encodings     int        // Transfer-Encoding fields
	encoding      fieldValue // the first of them
	last          bool       // the connection carries no request after this one
}

// field is a header field line as far as the framer reads it.
type field struct {
	name  clip
	colon bool
	value fieldValue
}

// read reads the next bytes of requests from r into p, as the server's Read of a connection.
// Once they broke HTTP/1.1's syntax it returns the error, at once and every time: the server's
// bufio.Reader hands over the bytes before the error as a line and drops the error, then reads
// again. It never returns a byte past the last request the connection carries: it reads and drops
// those until r fails (a read deadline, or the client's close), and returns io.EOF once the
// server has answered that request.
func (f *framer) read(r io.Reader, p []byte) (int, error) {
	for {
		if f.err != nil {
			return 0, f.err
		}
		if last := f.closeAfter.Load(); last > 0 && int64(f.answers) >= last {
			return 0, io.EOF
		}
		n, err := r.Read(p)
		kept, scanErr := f.scan(p[:n])
		switch {
		case scanErr != nil:
			return kept, scanErr
		case kept == 0 && n > 0 && err == nil:
			continue // all past the last request
		}
		return kept, err
	}
}

// answered counts a request answered on the connection, which stays open for another.
func (f *framer) answered() { f.answers++ }

// servingLast reports whether the request the server is serving is the last the connection
// carries. The request served is the one after those answered: any other ends the connection.
func (f *framer) servingLast() bool { return f.closeAfter.Load() == int64(f.answers+1) }

// scan follows p, the next bytes read. It returns how many of p's bytes belong to requests the
// connection carries: all of them unless the last request ends in p, or a syntax error comes
// first (then the bytes before it, and the error).
func (f *framer) scan(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	for i := 0; i < len(p); i++ {
		switch f.state {
		case closed:
			return i, nil
		case inBody, inChunkData:
			n := min(uint64(len(p)-i), f.remaining)
			f.remaining -= n
			i += int(n) - 1
			if f.remaining == 0 {
				if f.state == inBody {
					f.endRequest()
				} else {
					f.state, f.crlfSeen = inChunkDataEnd, 0
				}
			}
		case inChunkDataEnd:
			if p[i] != "\r\n"[f.crlfSeen] {
				f.err = ErrBadChunk
				return i, f.err
			}
			if f.crlfSeen++; f.crlfSeen == 2 {
				f.state = inChunkSize
			}
		case inLine, inChunkSize:
			if err := f.lineByte(p[i]); err != nil {
				f.err = err
				return i, err
			}
		}
	}
	return len(p), nil
}

// lineByte takes the next byte of a line, and the line itself once it ends.
func (f *framer) lineByte(b byte) error {
	if f.skipCRLF > 0 {
		// After a POST, Go's server skips up to 4 CR or LF bytes before the next request line, a
		// tolerance of old clients' extra CRLF (RFC 9112 §2.2).
		f.skipCRLF--
		if b == '\r' || b == '\n' {
			return nil
		}
		f.skipCRLF = 0
	}
	if f.sawCR {
		f.sawCR = false
		if b != '\n' {
			return ErrBareCR
		}
		return f.endLine()
	}
	switch {
	case b == '\r':
		f.sawCR = true
	case b == '\n':
		return ErrBareLF
	case f.lineLen == 0 && f.state == inLine && f.lineNo > 0 && (b == ' ' || b == '\t'):
		return ErrObsFold
	default:
		f.lineLen++
		f.take(b)
	}
	return nil
}

// take keeps what framing needs of a line's byte.
func (f *framer) take(b byte) {
	switch {
	case f.state == inChunkSize:
		f.chunk.add(b)
	case f.trailers:
	case f.lineNo == 0:
		// Go's reader splits the request line at its first two spaces; the version is all the rest.
		switch {
		case b == ' ' && f.req.spaces < 2:
			f.req.spaces++
		case f.req.spaces == 0:
			f.req.method.add(b)
		case f.req.spaces == 2:
			f.req.proto.add(b)
		}
	case !f.field.colon && b == ':':
		f.field.colon = true
	case !f.field.colon:
		f.field.name.add(b)
	default:
		f.field.value.add(b)
	}
}

func (f *framer) endLine() error {
	empty := f.lineLen == 0
	f.lineLen = 0

	switch {
	case f.state == inChunkSize:
		size, ok := f.chunk.size()
		f.chunk = chunkSize{}
		switch {
		case !ok:
			return ErrBadChunk
		case size == 0:
			f.state, f.trailers, f.lineNo = inLine, true, 1
		default:
			f.state, f.remaining = inChunkData, size
		}
	case !empty:
		if f.lineNo > 0 && !f.trailers {
			f.endField()
		}
		f.lineNo++
	case f.trailers:
		f.endRequest()
	case f.lineNo == 0:
		// An empty request line: the server answers 400.
		f.requests++
		f.closeAfter.Store(int64(f.requests))
		f.state = closed
	default:
		f.startBody()
	}
	return nil
}

// endField notes a field line of a request's header section that frames its body.
func (f *framer) endField() {
	f.field.value.pending = 0 // trailing
	switch {
	case f.field.name.equalFold("Content-Length"):
		if f.req.lengths == 0 {
			f.req.length = f.field.value
		} else if f.field.value != f.req.length {
			f.req.lengthsDiffer = true
		}
		f.req.lengths++
	case f.field.name.equalFold("Transfer-Encoding"):
		if f.req.encodings == 0 {
			f.req.encoding = f.field.value
		}
		f.req.encodings++
	}
	f.field = field{}
}

// startBody follows the body that a request's header section, just ended, announces, by the
// rules of Go's server (net/http's readTransfer).
func (f *framer) startBody() {
	f.requests++
	req := &f.req
	major, minor, versionOK := 0, 0, false
	if proto, whole := req.proto.value(); whole {
		major, minor, versionOK = http.ParseHTTPVersion(proto)
	}
	// Go's server reads Transfer-Encoding from HTTP/1.1 on, and ignores it before.
	chunked := req.encodings > 0 && (major > 1 || major == 1 && minor >= 1)
	length, lengthOK := req.length.contentLength()
	if !versionOK || chunked && (req.encodings > 1 || !req.encoding.equalFold("chunked")) ||
		req.lengths > 0 && (!lengthOK || req.lengthsDiffer) {
		// The server answers 400, or 501 for a coding other than chunked, and reads no body.
		f.closeAfter.Store(int64(f.requests))
		f.state = closed
		return
	}

	if req.encodings > 0 && (!chunked || req.lengths > 0) {
		req.last = true // faulty framing
		f.closeAfter.Store(int64(f.requests))
	}
	switch {
	case chunked:
		f.state = inChunkSize
	case length > 0:
		f.state, f.remaining = inBody, length
	default:
		f.endRequest()
	}
}

func (f *framer) endRequest() {
	f.ended++
	if f.req.last {
		f.state = closed
		return
	}
	if f.req.method.equal("POST") {
		f.skipCRLF = 4
	}
	f.state, f.trailers, f.lineNo = inLine, false, 0
	f.req = request{}
}

// maxClip is the most a clip keeps: enough for the longest string framing reads, a
// Content-Length of 19 digits (Go's server reads lengths below 2^63).
const maxClip = 19

// clip keeps the start of a string that framing compares with a few short ones, and its length.
type clip struct {
	b [maxClip]byte
	n int
}

func (c *clip) add(b byte) {
	if c.n < maxClip {
		c.b[c.n] = b
	}
	c.n++
}

// value returns the string, and whether all of it was kept.
func (c *clip) value() (string, bool) { return string(c.b[:min(c.n, maxClip)]), c.n <= maxClip }

func (c *clip) equal(s string) bool {
	v, ok := c.value()
	return ok && v == s
}

// equalFold compares as Go's reader compares header names and codings: ASCII letters in
// either case.
func (c *clip) equalFold(s string) bool {
	v, ok := c.value()
	return ok && equalFoldASCII(v, s)
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}

// fieldValue is a Content-Length or Transfer-Encoding value, without the spaces and tabs around
// it, as Go's reader trims it. Leading zeros are counted rather than kept, since a
// Content-Length may carry any number of them; so the value takes a fixed size, and two values
// are equal (==) when their texts are.
type fieldValue struct {
	zeros   int  // leading '0's
	rest    clip // what follows them
	pending int  // spaces or tabs after the last byte kept: trailing, unless more follows
}

func (v *fieldValue) add(b byte) {
	switch {
	case b == ' ' || b == '\t':
		if v.zeros > 0 || v.rest.n > 0 {
			v.pending++
		}
	case b == '0' && v.rest.n == 0 && v.pending == 0:
		v.zeros++
	default:
		// A value with spaces inside is no length or coding; which space stood there is moot.
		for ; v.pending > 0; v.pending-- {
			v.rest.add(' ')
		}
		v.rest.add(b)
	}
}

// contentLength reads a Content-Length as Go's reader does: decimal digits, below 2^63.
func (v *fieldValue) contentLength() (uint64, bool) {
	digits, ok := v.rest.value()
	switch {
	case !ok || v.zeros == 0 && digits == "":
		return 0, false
	case digits == "":
		return 0, true
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	return n, err == nil
}

func (v *fieldValue) equalFold(s string) bool { return v.zeros == 0 && v.rest.equalFold(s) }

// chunkSize reads a chunk-size line as Go's chunked reader does: up to 16 hex digits, then any
// chunk extension after a ';'. Only spaces or tabs at the end of the line are trimmed.
type chunkSize struct {
	n         uint64
	digits    int
	space     bool // a space or tab after the digits
	extension bool // past the ';'
	bad       bool
}

func (c *chunkSize) add(b byte) {
	if c.extension || c.bad {
		return
	}
	digit, isDigit := unhex(b)
	switch {
	case b == ' ' || b == '\t':
		c.space = true
	case c.space: // a space that is not trailing
		c.bad = true
	case b == ';':
		c.extension = true
	case isDigit && c.digits < 16:
		c.n = c.n<<4 | uint64(digit)
		c.digits++
	default:
		c.bad = true
	}
}

func (c *chunkSize) size() (uint64, bool) { return c.n, !c.bad && c.digits > 0 }

func unhex(b byte) (byte, bool) {
	switch {
	case '0' <= b && b <= '9':
		return b - '0', true
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10, true
	case 'A' <= b && b <= 'F':
		return b - 'A' + 10, true
	}
	return 0, false
}
