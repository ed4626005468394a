package mailer_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/mailer"
)

func TestLog(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer
	m := mailer.NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	if err := m.Send(t.Context(), testMessage()); err != nil {
		t.Fatal(err)
	}

	var entry struct {
		Msg       string `json:"msg"`
		To        string `json:"to"`
		Subject   string `json:"subject"`
		MessageID string `json:"message_id"`
		Message   string `json:"message"`
	}
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("want one JSON log line, got %q: %v", buf.String(), err)
	}
	if entry.To != "rider@example.com" || entry.Subject != "Your receipt" || entry.MessageID != "<ride-1.receipt@rocketrides.example>" {
		t.Errorf("unexpected log attributes %+v", entry)
	}
	for _, want := range []string{"\nSubject: Your receipt\n", "\nMessage-ID: <ride-1.receipt@rocketrides.example>\n", "\n\nYou were charged $20.00.\n"} {
		if !strings.Contains(entry.Message, want) {
			t.Errorf("want the logged message to contain %q, got:\n%s", want, entry.Message)
		}
	}

	bad := testMessage()
	bad.To = "not an address"
	if err := m.Send(t.Context(), bad); err == nil {
		t.Error("want a message SMTP would refuse refused by the log mailer too")
	}
}
