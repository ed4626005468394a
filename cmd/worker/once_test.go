package main

import (
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
)

// TestOnce: a receipt the mail server refuses for now is counted as failed and left for River's
// retry. (internal/testing/e2etest's TestProcesses runs -once on a receipt it sends.)
func TestOnce(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

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
