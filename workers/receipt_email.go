package workers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/models"
)

// message renders the receipt of ride: what was charged, for which ride, and the charge to
// quote to support.
func (rideReceipt) message(ride *models.Ride, user *models.User, args jobargs.Receipt, from, messageIDDomain string) *mailer.Message {
	amount := formatAmount(args.Amount, args.Currency)
	chargeID := ""
	if ride.StripeChargeID != nil {
		chargeID = *ride.StripeChargeID
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Thanks for flying with Rocket Rides!\n\n")
	writeRide(&b, ride)
	fmt.Fprintf(&b, "Charged    %s to your card on file\n", amount)
	fmt.Fprintf(&b, "Charge ID  %s\n\n", chargeID)
	fmt.Fprintf(&b, "Questions about this charge? Reply to this email and quote the charge ID.\n\n")
	subject := fmt.Sprintf("Your Rocket Rides receipt: %s for ride #%d", amount, ride.ID)
	return signed(&b, from, user, subject, ReceiptMessageID(ride, messageIDDomain))
}

// ReceiptMessageID is the same for every attempt at one ride's receipt, so that copies sent by
// retries can be recognised downstream. It includes the ride's creation time as well as its id
// because ids repeat across databases (a reset, a second region), and a mail system that
// deduplicates would then drop a new ride's receipt as a copy of an old one. Exported for
// internal/seed, which records receipts the way this worker does.
func ReceiptMessageID(ride *models.Ride, domain string) string {
	return rideMessageID(ride, "receipt", domain)
}

// message renders the receipt of ride's refund: that the ride was cancelled, what was given
// back to the card, and the refund to quote to support.
func (refundReceipt) message(ride *models.Ride, user *models.User, args jobargs.Receipt, from, messageIDDomain string) *mailer.Message {
	amount := formatAmount(args.Amount, args.Currency)

	var b strings.Builder
	fmt.Fprintf(&b, "Your ride was cancelled, and its charge refunded.\n\n")
	writeRide(&b, ride)
	fmt.Fprintf(&b, "Refunded   %s to your card on file\n", amount)
	if ride.StripeRefundID != nil {
		fmt.Fprintf(&b, "Refund ID  %s\n", *ride.StripeRefundID)
	}
	fmt.Fprintf(&b, "\nA refund can take 5 to 10 business days to show on your statement.\n")
	if ride.StripeRefundID != nil {
		fmt.Fprintf(&b, "Questions about this refund? Reply to this email and quote the refund ID.\n\n")
	} else {
		fmt.Fprintf(&b, "Questions about this refund? Reply to this email.\n\n")
	}
	subject := fmt.Sprintf("Your Rocket Rides refund: %s for ride #%d", amount, ride.ID)
	return signed(&b, from, user, subject, refundReceiptMessageID(ride, messageIDDomain))
}

// refundReceiptMessageID is to the refund receipt what ReceiptMessageID is to the ride's: the
// same for every attempt, and another than the ride receipt's.
func refundReceiptMessageID(ride *models.Ride, domain string) string {
	return rideMessageID(ride, "refund-receipt", domain)
}

// signed ends body with the sign-off both receipts share, and makes it a message to user.
func signed(body *strings.Builder, from string, user *models.User, subject, messageID string) *mailer.Message {
	fmt.Fprintf(body, "Rocket Rides\n")
	return &mailer.Message{From: from, To: user.Email, Subject: subject, Body: body.String(), MessageID: messageID}
}

// rideMessageID is the Message-ID of ride's message of the given kind.
func rideMessageID(ride *models.Ride, kind, domain string) string {
	return fmt.Sprintf("<ride-%d.%d.%s@%s>", ride.ID, ride.CreatedAt.UnixMicro(), kind, domain)
}

// writeRide writes the lines of a receipt that say which ride it is about.
func writeRide(b *strings.Builder, ride *models.Ride) {
	fmt.Fprintf(b, "Ride       #%d, %s\n", ride.ID, ride.CreatedAt.UTC().Format("2 January 2006, 15:04 MST"))
	fmt.Fprintf(b, "From       %.5f, %.5f\n", ride.OriginLat, ride.OriginLon)
	fmt.Fprintf(b, "To         %.5f, %.5f\n", ride.TargetLat, ride.TargetLon)
}

// currencySymbols are the currencies a receipt writes with a symbol; others get their code.
var currencySymbols = map[string]string{"usd": "$", "eur": "€", "gbp": "£", "jpy": "¥"}

// zeroDecimalCurrencies are those Stripe counts in whole units rather than hundredths
// (https://docs.stripe.com/currencies#zero-decimal).
var zeroDecimalCurrencies = map[string]bool{
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true,
	"mga": true, "pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true,
	"xof": true, "xpf": true,
}

// formatAmount writes amount, in the currency's smallest unit as Stripe counts it, the way a
// person reads it: 2000 usd is "$20.00", 123456 eur "€1,234.56", 500 jpy "¥500", 2000 chf
// "20.00 CHF".
func formatAmount(amount int64, currency string) string {
	currency = strings.ToLower(currency)
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}

	var number string
	if zeroDecimalCurrencies[currency] {
		number = groupThousands(strconv.FormatInt(amount, 10))
	} else {
		number = groupThousands(strconv.FormatInt(amount/100, 10)) + fmt.Sprintf(".%02d", amount%100)
	}

	if symbol, ok := currencySymbols[currency]; ok {
		return sign + symbol + number
	}
	return sign + number + " " + strings.ToUpper(currency)
}

// groupThousands puts commas between groups of three digits: "1234567" is "1,234,567".
func groupThousands(digits string) string {
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
