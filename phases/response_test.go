package phases

import (
	"encoding/json"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
)

func TestResponseStoresNoRequestID(t *testing.T) {
	t.Parallel()
	p := problem.New(statusPaymentRequired, problem.CodeCardDeclined, "Card declined", "Declined.")
	p.RequestID = "req_first_attempt"

	var progress models.IdempotencyKeyProgress
	if err := (Response{Status: statusPaymentRequired, Body: p}).apply(&progress); err != nil {
		t.Fatal(err)
	}
	var stored problem.Problem
	if err := json.Unmarshal(progress.ResponseBody, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.RequestID != "" || stored.Code != problem.CodeCardDeclined || stored.Detail != "Declined." {
		t.Fatalf("want the problem stored without a request id, got %s", progress.ResponseBody)
	}
	if p.RequestID != "req_first_attempt" {
		t.Fatal("want the phase's own problem left as it was")
	}
}
