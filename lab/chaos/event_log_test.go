package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestEventLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newEventLog(&buf)
	for _, line := range []string{
		`api-1       | time=2026-01-01T00:00:00Z level=WARN msg="Faults: crashing" point=charge_answered`,
		`api-2       | time=2026-01-01T00:00:00Z level=WARN msg="Faults: crashing" point=finished`,
		`fakestripe  | time=2026-01-01T00:00:00Z level=INFO msg="Fakestripe: injecting fault" fault=charge_then_drop idempotency_key=k`,
		`completer   | time=2026-01-01T00:00:00Z level=INFO msg="Completer: pushed keys" num_succeeded=3 num_failed=0 num_skipped=1`,
		`worker-1    | time=2026-01-01T00:00:00Z level=INFO msg="Worker: sent receipt" ride_id=1`,
		`api-1       | time=2026-01-01T00:00:00Z level=INFO msg="API: request" method=POST path=/rides status=409 duration=8.51s remote_addr=x`,
		`api-1       | time=2026-01-01T00:00:00Z level=INFO msg="API: request" method=POST path=/rides status=409 duration=1.2ms remote_addr=x`,
		`api-2       | time=2026-01-01T00:00:00Z level=INFO msg="API: request" method=POST path=/rides/123/cancel status=409 duration=7.9s remote_addr=x`,
		`worker-1    | time=2026-01-01T00:00:00Z level=WARN msg="Worker: refund receipt was recorded by another job meanwhile; the rider may have it twice" ride_id=1`,
	} {
		if _, err := l.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	c := l.counts()
	if c.selfCrashes["charge_answered"] != 1 || c.selfCrashes["finished"] != 1 || c.stripeFaults["charge_then_drop"] != 1 ||
		c.completerFinished != 3 || c.fenced != 2 || c.receiptRaces != 1 {
		t.Errorf("unexpected counts %+v", c)
	}
	if strings.Count(buf.String(), "\n") != 9 {
		t.Errorf("want every line written through, got:\n%s", buf.String())
	}
}
