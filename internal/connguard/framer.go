package connguard

import (
	"errors"
	"strconv"
	"strings"
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

// maxLineKept is how much of a line the framer keeps to read it: enough for any
// Content-Length, Transfer-Encoding or chunk-size line the server would accept.
const maxLineKept = 1024

type frameState int

const (
	inLine         frameState = iota // a line of a header section: request line, field or trailer
	inBody                           // a Content-Length body: remaining bytes
	inChunkSize                      // a chunk-size line
	inChunkData                      // chunk data: remaining bytes
	inChunkDataEnd                   // the CRLF after chunk data: crlfSeen of its bytes read
	notFollowed                      // framing no longer followed, see framer.scan
)

// framer follows a connection's bytes in the order the server reads them, request by request,
// checking each header section's lines (and a chunked body's trailers) for ErrBareLF, ErrBareCR
// and ErrObsFold. It follows each body's framing to find where the next request begins, as the
// server does: Transfer-Encoding: chunked, else Content-Length, else none.
//
// A request that carries both Transfer-Encoding and Content-Length is marked ambiguous: the
// server reads it as chunked, and the guard has it answered with Connection: close, so that
// nothing after it on the connection is read as a request (RFC 9112 §6.3). From there on, and
// after anything the server itself refuses (an unknown transfer coding, a malformed length or
// chunk), the framer stops following: the connection ends with that request.
type framer struct {
	state     frameState
	trailers  bool   // inLine: the lines are a chunked body's trailers, not a request's header
	lineNo    int    // inLine: lines read of this section; 0 is the request line
	line      []byte // the current line, up to maxLineKept bytes
	lineLen   int    // the current line's length, all of it
	sawCR     bool   // the last byte was a CR
	remaining uint64 // inBody, inChunkData: bytes left
	crlfSeen  int    // inChunkDataEnd: of the CRLF

	lengths   []string // Content-Length values of this request
	encodings []string // Transfer-Encoding values of this request

	err       error       // sticky: once broken, every later read fails alike
	ambiguous atomic.Bool // a request carried both framing headers; read by the handler
}

// scan follows p, the next bytes read. On a syntax error it returns how many of p's bytes come
// before it, and the error.
func (f *framer) scan(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	for i := 0; i < len(p); i++ {
		switch f.state {
		case notFollowed:
			return len(p), nil
		case inBody, inChunkData:
			n := min(uint64(len(p)-i), f.remaining)
			f.remaining -= n
			i += int(n) - 1
			if f.remaining == 0 {
				if f.state == inBody {
					f.startRequest()
				} else {
					f.state, f.crlfSeen = inChunkDataEnd, 0
				}
			}
		case inChunkDataEnd:
			if p[i] != "\r\n"[f.crlfSeen] {
				f.state = notFollowed // the server refuses the body
				continue
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
	if f.sawCR {
		f.sawCR = false
		if b != '\n' {
			return ErrBareCR
		}
		f.endLine()
		return nil
	}
	switch {
	case b == '\r':
		f.sawCR = true
	case b == '\n':
		return ErrBareLF
	case f.lineLen == 0 && f.state == inLine && f.lineNo > 0 && (b == ' ' || b == '\t'):
		return ErrObsFold
	default:
		if f.lineLen < maxLineKept {
			f.line = append(f.line, b)
		}
		f.lineLen++
	}
	return nil
}

func (f *framer) endLine() {
	line := string(f.line)
	empty := f.lineLen == 0
	f.line, f.lineLen = f.line[:0], 0

	if f.state == inChunkSize {
		size, ok := chunkSize(line)
		switch {
		case !ok:
			f.state = notFollowed // the server refuses the body
		case size == 0:
			f.state, f.trailers, f.lineNo = inLine, true, 1
		default:
			f.state, f.remaining = inChunkData, size
		}
		return
	}

	switch {
	case !empty:
		if f.lineNo > 0 && !f.trailers {
			name, value, _ := strings.Cut(line, ":")
			switch {
			case strings.EqualFold(name, "Content-Length"):
				f.lengths = append(f.lengths, strings.TrimSpace(value))
			case strings.EqualFold(name, "Transfer-Encoding"):
				f.encodings = append(f.encodings, strings.TrimSpace(value))
			}
		}
		f.lineNo++
	case f.trailers:
		f.startRequest()
	default:
		f.startBody()
	}
}

// startBody follows the body that a request's header section, just ended, announces.
func (f *framer) startBody() {
	switch {
	case len(f.encodings) > 0 && len(f.lengths) > 0:
		f.ambiguous.Store(true)
		f.state = notFollowed
	case len(f.encodings) > 0:
		if len(f.encodings) == 1 && strings.EqualFold(f.encodings[0], "chunked") {
			f.state = inChunkSize
		} else {
			f.state = notFollowed // the server answers 501
		}
	case len(f.lengths) > 0:
		n, err := strconv.ParseUint(f.lengths[0], 10, 63)
		for _, l := range f.lengths[1:] {
			if l != f.lengths[0] {
				err = errors.New("differing lengths")
			}
		}
		switch {
		case err != nil:
			f.state = notFollowed // the server answers 400
		case n == 0:
			f.startRequest()
		default:
			f.state, f.remaining = inBody, n
		}
	default:
		f.startRequest()
	}
}

func (f *framer) startRequest() {
	f.state, f.trailers, f.lineNo = inLine, false, 0
	f.lengths, f.encodings = f.lengths[:0], f.encodings[:0]
}

// chunkSize reads a chunk-size line: hex digits, then any chunk extension.
func chunkSize(line string) (uint64, bool) {
	digits, _, _ := strings.Cut(line, ";")
	digits = strings.TrimRight(digits, " \t")
	if digits == "" || len(digits) > 16 {
		return 0, false
	}
	size, err := strconv.ParseUint(digits, 16, 64)
	return size, err == nil && size < 1<<63
}
