package main

import (
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
)

func TestOnce(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	t.Run("SendsTheReceiptAndPrintsCounts", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		server := smtptest.NewServer(t, smtptest.Options{})
		env := []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + server.URL()}

		stdout, stderr, code := proctest.Run(t, bin, env, "-once")
		if code != 0 || stdout != `{"completed":1,"failed":0,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want exit 0 and one line of counts, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		msgs := server.Messages()
		if len(msgs) != 1 || msgs[0].To[0] != "rider@example.com" {
			t.Fatalf("want one receipt mailed to the rider, got %+v", msgs)
		}
		if text, err := msgs[0].Text(); err != nil || !strings.Contains(text, "$20.00") {
			t.Fatalf("want the receipt to say $20.00, got %q (%v)", text, err)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err != nil {
			t.Fatalf("want the receipt recorded: %v", err)
		}
		if state := w.jobState(t); state != "completed" {
			t.Fatalf("want the job completed, got %s", state)
		}

		// Nothing left: a second pass does nothing and says so.
		stdout, stderr, code = proctest.Run(t, bin, env, "-once")
		if code != 0 || stdout != `{"completed":0,"failed":0,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want zero counts, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		if n := len(server.Messages()); n != 1 {
			t.Fatalf("want still 1 receipt, got %d", n)
		}
	})

	t.Run("CountsAFailedAttemptAndLeavesTheJobForLater", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		server := smtptest.NewServer(t, smtptest.Options{})
		server.FailNext(1, "451 4.3.0 Try again later")

		stdout, stderr, code := proctest.Run(t, bin, []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + server.URL()}, "-once")
		if code != 0 || stdout != `{"completed":0,"failed":1,"discarded":0,"cancelled":0}`+"\n" {
			t.Fatalf("want exit 0 and one failure counted, got %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		if state := w.jobState(t); state != "available" && state != "retryable" {
			t.Fatalf("want the job waiting for its retry, got %s", state)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err == nil {
			t.Fatal("want no receipt recorded")
		}
	})
}
