package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/dbtest"
	"github.com/rocketrides/rocketrides/internal/proctest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestCreateUser(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")
	env := []string{"DATABASE_URL=" + dbtest.NewDB(t)}

	t.Run("WithStripeCustomerID", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "create-user", "-email", "a@example.com", "-stripe-customer-id", "cus_A")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var user map[string]any
		if err := json.Unmarshal([]byte(out), &user); err != nil || user["email"] != "a@example.com" || user["token"] == "" || user["id"] == nil {
			t.Fatalf("want one JSON line with id, email, token; got %q", out)
		}
		if strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("want exactly one line, got %q", out)
		}
	})

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"NoCommand", nil, "no command"},
		{"UnknownCommand", []string{"delete-everything"}, "unknown command"},
		{"NoEmail", []string{"create-user", "-stripe-customer-id", "cus_B"}, "-email"},
		{"NeitherCustomerNorCard", []string{"create-user", "-email", "b@example.com"}, "exactly one of"},
		{"BothCustomerAndCard", []string{"create-user", "-email", "b@example.com", "-stripe-customer-id", "cus_B", "-card", "tok_visa"}, "exactly one of"},
		{"CardWithoutStripeKey", []string{"create-user", "-email", "b@example.com", "-card", "tok_visa"}, "STRIPE_API_KEY is not set"},
		{"DuplicateCustomer", []string{"create-user", "-email", "c@example.com", "-stripe-customer-id", "cus_A"}, "already exists"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := proctest.Run(t, admin, env, tt.args...)
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("want a non-zero exit saying %q, got %d: %s", tt.want, code, errOut)
			}
		})
	}
}
