package workers

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
)

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{2000, "usd", "$20.00"},
		{2000, "USD", "$20.00"},
		{5, "usd", "$0.05"},
		{0, "usd", "$0.00"},
		{123456789, "usd", "$1,234,567.89"},
		{-2000, "usd", "-$20.00"},
		{550, "eur", "€5.50"},
		{999, "gbp", "£9.99"},
		{500, "jpy", "¥500"},
		{1500000, "krw", "1,500,000 KRW"},
		{2000, "chf", "20.00 CHF"},
	} {
		if got := formatAmount(tt.amount, tt.currency); got != tt.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", tt.amount, tt.currency, got, tt.want)
		}
	}
}

func TestReceiptMessage(t *testing.T) {
	t.Parallel()

	charge := "ch_123"
	ride := &models.Ride{
		ID: 123, CreatedAt: time.Date(2024, 3, 1, 12, 30, 0, 123456000, time.UTC),
		OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.8044, TargetLon: -122.2712,
		StripeChargeID: &charge, UserID: 7,
	}
	user := &models.User{ID: 7, Email: "rider@example.com"}
	args := jobargs.Receipt{RideID: 123, UserID: 7, Amount: 2000, Currency: "usd"}

	m := rideReceipt{}.message(ride, user, args, "Rocket Rides <receipts@rocketrides.example>", "rocketrides.example")
	if m.To != "rider@example.com" || m.From != "Rocket Rides <receipts@rocketrides.example>" {
		t.Errorf("unexpected addresses %q -> %q", m.From, m.To)
	}
	if m.Subject != "Your Rocket Rides receipt: $20.00 for ride #123" {
		t.Errorf("unexpected subject %q", m.Subject)
	}
	if m.MessageID != "<ride-123.1709296200123456.receipt@rocketrides.example>" {
		t.Errorf("unexpected Message-ID %q", m.MessageID)
	}
	for _, want := range []string{
		"Ride       #123, 1 March 2024, 12:30 UTC\n",
		"From       37.77490, -122.41940\n",
		"To         37.80440, -122.27120\n",
		"Charged    $20.00 to your card on file\n",
		"Charge ID  ch_123\n",
	} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("want the body to contain %q, got:\n%s", want, m.Body)
		}
	}

	// Every attempt at this ride's receipt gets the same Message-ID; a ride with the same id in
	// another database (created at another time) gets another.
	again := rideReceipt{}.message(ride, user, args, "Rocket Rides <receipts@rocketrides.example>", "rocketrides.example")
	other := *ride
	other.CreatedAt = other.CreatedAt.Add(time.Microsecond)
	if again.MessageID != m.MessageID || ReceiptMessageID(&other, "rocketrides.example") == m.MessageID {
		t.Error("want the Message-ID stable for a ride and different for another ride with the same id")
	}
}

func TestRefundReceiptMessage(t *testing.T) {
	t.Parallel()

	charge, refund := "ch_123", "re_456"
	ride := &models.Ride{
		ID: 123, CreatedAt: time.Date(2024, 3, 1, 12, 30, 0, 123456000, time.UTC),
		OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.8044, TargetLon: -122.2712,
		StripeChargeID: &charge, StripeRefundID: &refund, UserID: 7,
	}
	user := &models.User{ID: 7, Email: "rider@example.com"}
	args := jobargs.Receipt{RideID: 123, UserID: 7, Amount: 2000, Currency: "usd"}

	m := refundReceipt{}.message(ride, user, args, "Rocket Rides <receipts@rocketrides.example>", "rocketrides.example")
	if m.To != "rider@example.com" || m.From != "Rocket Rides <receipts@rocketrides.example>" {
		t.Errorf("unexpected addresses %q -> %q", m.From, m.To)
	}
	if m.Subject != "Your Rocket Rides refund: $20.00 for ride #123" {
		t.Errorf("unexpected subject %q", m.Subject)
	}
	if m.MessageID != "<ride-123.1709296200123456.refund-receipt@rocketrides.example>" {
		t.Errorf("unexpected Message-ID %q", m.MessageID)
	}
	for _, want := range []string{
		"Your ride was cancelled",
		"Ride       #123, 1 March 2024, 12:30 UTC\n",
		"From       37.77490, -122.41940\n",
		"To         37.80440, -122.27120\n",
		"Refunded   $20.00 to your card on file\n",
		"Refund ID  re_456\n",
		"quote the refund ID",
	} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("want the body to contain %q, got:\n%s", want, m.Body)
		}
	}

	// Without a refund id the receipt still says what was refunded, and names no refund.
	ride.StripeRefundID = nil
	m = refundReceipt{}.message(ride, user, args, "Rocket Rides <receipts@rocketrides.example>", "rocketrides.example")
	if !strings.Contains(m.Body, "Refunded   $20.00") || strings.Contains(m.Body, "Refund ID") || strings.Contains(m.Body, "quote the refund ID") {
		t.Errorf("want the amount and no refund id, got:\n%s", m.Body)
	}
}
