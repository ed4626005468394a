package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/problem"
)

// FuzzWriteProblem writes any problem, fresh and then as stored and replayed. Every answer
// must be valid problem+json that decodes to the very problem written (strings as JSON carries
// them: invalid UTF-8 becomes U+FFFD) with the response's request id, under the problem's
// status, with a Content-Length that is the body's, and with a Retry-After, when there is a
// wait, that is a whole number of seconds no shorter than the wait.
func FuzzWriteProblem(f *testing.F) {
	f.Add(402, "card_declined", "Card declined", "Your card was declined.", "", "generic_decline", "req_5JRVNSK7BQ2TQEDXJ3KUHGWZ4M", int64(0))
	f.Add(400, "invalid_parameter", "Invalid parameter", "origin_lat is required.", "origin_lat", "", "client-id-1", int64(0))
	f.Add(503, "service_unavailable", "Service unavailable", "Retry.", "", "", "x", int64(5000))
	f.Add(429, "booking_rate_limited", "Too many requests", "Slow down.", "", "", "x", int64(1500))
	f.Add(409, "idempotency_key_in_use", "In use", "Retry shortly.", "", "", "x", int64(1))
	f.Add(401, "unauthorized", "Unauthorized", "<script>&\u2028</script>", "", "", "", int64(0))
	f.Add(500, "internal_error", "\xff\xfe", "bad \xc3 utf-8 \"quoted\" \\", "p\x00", "\t", "id\xff", int64(-1))

	f.Fuzz(func(t *testing.T, status int, code, title, detail, param, declineCode, requestID string, retryAfterMillis int64) {
		status = 400 + int(uint(status)%200) // the API answers problems with 4xx and 5xx only
		e := newError(status, problem.Code(code), title, detail)
		e.problem.Param = param
		e.problem.DeclineCode = declineCode
		e.retryAfter = time.Duration(retryAfterMillis%(1<<40)) * time.Millisecond

		rec := httptest.NewRecorder()
		rec.Header().Set(requestIDHeader, requestID)
		writeProblem(rec, e)

		want := *e.problem
		want.Type, want.Title, want.Detail = asJSON(want.Type), asJSON(title), asJSON(detail)
		want.Code, want.Param, want.DeclineCode = problem.Code(asJSON(code)), asJSON(param), asJSON(declineCode)
		want.RequestID = asJSON(requestID)
		requireProblemResponse(t, rec, status, want)
		if e.problem.RequestID != "" {
			t.Fatalf("writing a problem changed it: %+v", e.problem)
		}

		switch retryAfter := rec.Header().Get("Retry-After"); {
		case e.retryAfter <= 0 && retryAfter != "":
			t.Fatalf("no wait, yet Retry-After %q", retryAfter)
		case e.retryAfter > 0:
			seconds, err := strconv.Atoi(retryAfter)
			if err != nil || time.Duration(seconds)*time.Second < e.retryAfter {
				t.Fatalf("a wait of %s, yet Retry-After %q", e.retryAfter, retryAfter)
			}
		}
		if (status == http.StatusUnauthorized) != (rec.Header().Get("WWW-Authenticate") != "") {
			t.Fatalf("%d with WWW-Authenticate %q", status, rec.Header().Get("WWW-Authenticate"))
		}

		// Stored as the phases store it, without a request id, and served to a replay, which
		// gets its own.
		storedProblem := want
		storedProblem.RequestID = ""
		stored, err := json.Marshal(&storedProblem)
		if err != nil {
			t.Fatal(err)
		}
		replay := httptest.NewRecorder()
		replay.Header().Set(requestIDHeader, "replay-"+requestID)
		writeStoredProblem(replay, status, stored)
		want.RequestID = asJSON("replay-" + requestID)
		requireProblemResponse(t, replay, status, want)
	})
}

// FuzzWriteStoredProblem serves any stored body. A stored problem goes out as stored but for
// the request id, which is the replay's; anything else goes out byte for byte; valid JSON
// stays valid JSON; and every one ends in the newline that every JSON answer ends in.
func FuzzWriteStoredProblem(f *testing.F) {
	f.Add(402, []byte(`{"type":"https://rocketrides.example/problems/card_declined","title":"Card declined","status":402,"detail":"Your card was declined.","code":"card_declined","decline_code":"generic_decline"}`))
	f.Add(500, []byte(`{"status":500,"code":"payment_needs_review","request_id":"req_old"}`))
	f.Add(402, []byte(`{"status":"402"}`))
	f.Add(402, []byte(`{"STATUS":402,"Detail":"case"}`))
	f.Add(402, []byte(`[1,2]`))
	f.Add(402, []byte(`null`))
	f.Add(402, []byte(`{"detail":"a","detail":"b"}`))
	f.Add(402, []byte(`not json`))
	f.Add(402, []byte(``))

	f.Fuzz(func(t *testing.T, status int, stored []byte) {
		status = 400 + int(uint(status)%200)
		rec := httptest.NewRecorder()
		rec.Header().Set(requestIDHeader, "req_replay")
		writeStoredProblem(rec, status, stored)

		body := rec.Body.Bytes()
		if rec.Code != status || rec.Header().Get("Content-Type") != problem.ContentType ||
			rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Fatalf("want %d %s with its length, got %d %v", status, problem.ContentType, rec.Code, rec.Header())
		}
		if json.Valid(stored) && !json.Valid(body) {
			t.Fatalf("stored %q, served invalid JSON %q", stored, body)
		}
		var p problem.Problem
		if err := json.Unmarshal(stored, &p); err != nil {
			if !bytes.Equal(body, append(slices.Clip(stored), '\n')) {
				t.Fatalf("stored %q is no problem document; want it served as stored, with the newline every JSON answer ends in, got %q", stored, body)
			}
			return
		}
		if !bytes.HasSuffix(body, []byte("}\n")) {
			t.Fatalf("want the problem to end in one newline, got %q", body)
		}
		p.RequestID = "req_replay"
		var served problem.Problem
		if err := json.Unmarshal(body, &served); err != nil || served != p {
			t.Fatalf("stored %q, want %+v served, got %q", stored, p, body)
		}
	})
}

// requireProblemResponse checks that rec holds want, as valid problem+json under status.
func requireProblemResponse(t *testing.T, rec *httptest.ResponseRecorder, status int, want problem.Problem) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code != status || rec.Header().Get("Content-Type") != problem.ContentType ||
		rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("want %d %s with its length, got %d %v", status, problem.ContentType, rec.Code, rec.Header())
	}
	if !json.Valid(body) || !bytes.HasSuffix(body, []byte("}\n")) {
		t.Fatalf("want valid JSON ending in one newline, got %q", body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var got problem.Problem
	if err := dec.Decode(&got); err != nil || got != want {
		t.Fatalf("want %+v, got %q (%v)", want, body, err)
	}
}

// asJSON is s as a JSON string carries it: each byte that is not valid UTF-8 becomes U+FFFD.
func asJSON(s string) string { return string([]rune(s)) }
