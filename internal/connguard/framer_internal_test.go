package connguard

import (
	"errors"
	"testing"
)

// keepAliveRequests are three requests sent on one connection: a body by length, a chunked one
// with a trailer, and none. Their bodies hold bytes that would be errors in a header section.
const keepAliveRequests = "" +
	"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nbare\n \r b" +
	"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n" +
	"4;ext=1\r\nab\nc\r\n2 \r\n d\r\n0\r\nX-Trailer: t\r\n\r\n" +
	"GET /c HTTP/1.1\r\nHost: x\r\nX-Folded-Look: a\tb\r\n\r\n"

func TestFramer(t *testing.T) {
	t.Parallel()

	t.Run("FollowsRequestsInAnyPieces", func(t *testing.T) {
		for _, piece := range []int{1, 2, 3, 7, len(keepAliveRequests)} {
			var f framer
			for rest := keepAliveRequests; rest != ""; {
				n := min(piece, len(rest))
				if valid, err := f.scan([]byte(rest[:n])); err != nil || valid != n {
					t.Fatalf("pieces of %d: scan(%q) = %d, %v", piece, rest[:n], valid, err)
				}
				rest = rest[n:]
			}
			if f.state != inLine || f.lineNo != 0 || f.lineLen != 0 {
				t.Fatalf("pieces of %d: want the framer at the start of a request, got state %d line %d", piece, f.state, f.lineNo)
			}
		}
	})

	t.Run("RefusesLinesThatAreNotCRLF", func(t *testing.T) {
		for _, tc := range []struct {
			name, input, validPrefix string
			want                     error
		}{
			{"BareLFInHeader", "GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", "GET / HTTP/1.1\r\nHost: x", ErrBareLF},
			{"BareLFRequestLine", "GET / HTTP/1.1\nHost: x\r\n\r\n", "GET / HTTP/1.1", ErrBareLF},
			{"BareLFEndsHeader", "GET / HTTP/1.1\r\nHost: x\r\n\n", "GET / HTTP/1.1\r\nHost: x\r\n", ErrBareLF},
			{"BareCR", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", "GET / HTTP/1.1\r\nX: a\r", ErrBareCR},
			{"ObsFoldSpace", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", "GET / HTTP/1.1\r\nX: a\r\n", ErrObsFold},
			{"ObsFoldTab", "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", "GET / HTTP/1.1\r\nX: a\r\n", ErrObsFold},
			{"ObsFoldInTrailer", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: a\r\n b\r\n\r\n",
				"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: a\r\n", ErrObsFold},
			{"BareLFInChunkSize", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\na\r\n0\r\n\r\n",
				"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1", ErrBareLF},
			{"BareLFInTheNextRequest", "GET /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1\nX: y\r\n\r\n",
				"GET /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1", ErrBareLF},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var f framer
				valid, err := f.scan([]byte(tc.input))
				if !errors.Is(err, tc.want) || tc.input[:valid] != tc.validPrefix {
					t.Fatalf("want %v after %q, got %v after %q", tc.want, tc.validPrefix, err, tc.input[:valid])
				}
				if _, err := f.scan([]byte("GET / HTTP/1.1\r\n\r\n")); !errors.Is(err, tc.want) {
					t.Fatalf("want the error to stick, got %v", err)
				}
			})
		}
	})

	t.Run("FaultyFramingEndsTheConnectionAfterTheRequest", func(t *testing.T) {
		for _, tc := range []struct{ name, request string }{
			{"HTTP10WithTransferEncoding", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"},
			{"HTTP10WithTransferEncodingAndLength", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc"},
			{"TransferEncodingAndLength", "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var f framer
				kept, err := f.scan([]byte("GET / HTTP/1.1\r\n\r\n" + tc.request + "GET /x HTTP/1.1\n\n"))
				if err != nil || kept != len("GET / HTTP/1.1\r\n\r\n"+tc.request) {
					t.Fatalf("want the bytes up to the end of the request kept and no error, got %d, %v", kept, err)
				}
				if f.state != closed || f.closeAfter.Load() != 2 || f.ended != 2 {
					t.Fatalf("want the second request read whole and the last, got state %d, last %d, %d ended", f.state, f.closeAfter.Load(), f.ended)
				}
				if kept, err := f.scan([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil || kept != 0 {
					t.Fatalf("want nothing more kept, got %d, %v", kept, err)
				}
			})
		}
	})

	t.Run("EndsTheConnectionAtWhatTheServerRefuses", func(t *testing.T) {
		for _, header := range []string{
			"Transfer-Encoding: gzip\r\n",
			"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
			"Content-Length: -1\r\n",
			"Content-Length: 1\r\nContent-Length: 2\r\n",
		} {
			var f framer
			head := "POST / HTTP/1.1\r\n" + header + "\r\n"
			if kept, err := f.scan([]byte(head + "GET / HTTP/1.1\n\n")); err != nil || kept != len(head) || f.state != closed {
				t.Fatalf("%q: want the header kept, nothing after it, and no error, got %d of %d, state %d, %v", header, kept, len(head), f.state, err)
			}
		}
	})

	t.Run("ReadsLengthsAsTheServerDoes", func(t *testing.T) {
		for _, tc := range []struct {
			value string
			want  uint64 // 0: refused
		}{
			{"9223372036854775807", 1<<63 - 1},
			{"0000000000000000000000000000000000000000012", 12},
			{" \t 12 \t ", 12},
			{"9223372036854775808", 0},
			{"1 2", 0},
			{"+12", 0},
			{"", 0},
		} {
			var f framer
			f.scan([]byte("POST / HTTP/1.1\r\nContent-Length: " + tc.value + "\r\n\r\n"))
			if tc.want == 0 && f.state != closed || tc.want > 0 && (f.state != inBody || f.remaining != tc.want) {
				t.Fatalf("Content-Length %q: want a body of %d (0: refused), got state %d, %d left", tc.value, tc.want, f.state, f.remaining)
			}
		}
	})

	t.Run("RefusesMalformedChunks", func(t *testing.T) {
		for _, body := range []string{"x\r\n", " 1\r\na\r\n", "1 ;ext\r\na\r\n", "1\r\nab\r\n", "11111111111111111\r\n"} {
			var f framer
			head := "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
			if _, err := f.scan([]byte(head + body)); !errors.Is(err, ErrBadChunk) {
				t.Fatalf("%q: want ErrBadChunk, got %v", body, err)
			}
		}
	})

	t.Run("SkipsCRLFAfterAPost", func(t *testing.T) {
		var f framer
		input := "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\na\r\n\r\nGET / HTTP/1.1\r\n\r\n"
		if kept, err := f.scan([]byte(input)); err != nil || kept != len(input) || f.ended != 2 {
			t.Fatalf("want two requests read, got %d ended, %d kept, %v", f.ended, kept, err)
		}
	})
}

// FuzzFramer holds the framer to one answer however the server's reads cut the bytes: the same
// error after the same bytes, or none and the same place.
func FuzzFramer(f *testing.F) {
	f.Add(keepAliveRequests, 5)
	f.Add("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 20)
	f.Add("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n", 50)
	f.Add("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nabGET / HTTP/1.1\r\n\r\n", 60)
	f.Fuzz(func(t *testing.T, input string, cut int) {
		var whole, pieces framer
		wantKept, wantErr := whole.scan([]byte(input))
		if cut < 0 || cut > len(input) {
			cut = len(input) / 2
		}
		kept, err := pieces.scan([]byte(input[:cut]))
		if err == nil && kept == cut {
			var rest int
			rest, err = pieces.scan([]byte(input[cut:]))
			kept += rest
		}
		if !errors.Is(err, wantErr) || kept != wantKept {
			t.Fatalf("cut at %d: want %d, %v; got %d, %v", cut, wantKept, wantErr, kept, err)
		}
		if wantErr == nil && (whole.state != pieces.state || whole.remaining != pieces.remaining ||
			whole.requests != pieces.requests || whole.ended != pieces.ended || whole.closeAfter.Load() != pieces.closeAfter.Load()) {
			t.Fatalf("cut at %d: the framers disagree on where they are", cut)
		}
	})
}
