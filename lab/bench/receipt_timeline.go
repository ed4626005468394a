package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

// receiptTimeline is one receipt's way from its booking to the mail server (see receipts.go
// for where each time comes from).
type receiptTimeline struct {
	booking   *booking
	staged    time.Time
	enqueuing time.Time
	fetched   time.Time
	accepted  time.Time
	attempts  int
}

// receiptMessageID finds the ride of a receipt in its Message-ID (workers.ReceiptMessageID).
var receiptMessageID = regexp.MustCompile(`^<ride-(\d+)\.`)

// receiptTimelines puts together the way of each booking's receipt, from River's job table on
// databaseURL and the messages the mail server accepted.
func receiptTimelines(ctx context.Context, databaseURL string, bookings []*booking, messages []smtptest.Message) ([]*receiptTimeline, error) {
	accepted := map[string]time.Time{}
	for _, m := range messages {
		parsed, err := m.Parse()
		if err != nil {
			return nil, fmt.Errorf("error parsing a receipt: %w", err)
		}
		match := receiptMessageID.FindStringSubmatch(parsed.Header.Get("Message-Id"))
		if match == nil {
			return nil, fmt.Errorf("a message that is no receipt reached the mail server: %s", parsed.Header.Get("Subject"))
		}
		if _, ok := accepted[match[1]]; ok {
			return nil, fmt.Errorf("ride %s got two receipts", match[1])
		}
		accepted[match[1]] = m.Accepted
	}

	timelines := make([]*receiptTimeline, len(bookings))
	err := withConn(ctx, databaseURL, func(conn *pgx.Conn) error {
		for i, b := range bookings {
			tl := &receiptTimeline{booking: b}
			var metadata []byte
			err := conn.QueryRow(ctx, `
				SELECT created_at, attempted_at, attempt, metadata FROM river_job
				WHERE kind = $1 AND args->>'ride_id' = $2`, jobargs.SendRideReceiptKind, b.rideID).
				Scan(&tl.enqueuing, &tl.fetched, &tl.attempts, &metadata)
			if err != nil {
				return fmt.Errorf("error reading the receipt job of ride %s: %w", b.rideID, err)
			}
			var ok bool
			if tl.staged, ok = jobargs.StagedAt(metadata); !ok {
				return fmt.Errorf("the receipt job of ride %s does not say when it was staged: %s", b.rideID, metadata)
			}
			if tl.accepted, ok = accepted[b.rideID]; !ok {
				return fmt.Errorf("no receipt of ride %s reached the mail server", b.rideID)
			}
			timelines[i] = tl
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return timelines, nil
}

// receiptStage is one column of the receipt report: a span of every receipt's way.
type receiptStage struct {
	label string
	span  func(tl *receiptTimeline) time.Duration
}

// receiptStages are the spans the report prints: the whole way first, from the booking to the
// mail server's acceptance, then each stage. The stages add up to the way from staged to accepted, which begins a few
// milliseconds before the 201 (the last phase's commit and the answer's way to the client).
var receiptStages = []receiptStage{
	{"201 -> mail server", func(tl *receiptTimeline) time.Duration { return tl.accepted.Sub(tl.booking.answered) }},
	{"staged -> mail server", func(tl *receiptTimeline) time.Duration { return tl.accepted.Sub(tl.staged) }},
	{"  staged -> enqueuer's batch", func(tl *receiptTimeline) time.Duration { return tl.enqueuing.Sub(tl.staged) }},
	{"  batch -> worker's fetch", func(tl *receiptTimeline) time.Duration { return tl.fetched.Sub(tl.enqueuing) }},
	{"  fetch -> mail server", func(tl *receiptTimeline) time.Duration { return tl.accepted.Sub(tl.fetched) }},
	{"booking (POST /rides)", func(tl *receiptTimeline) time.Duration { return tl.booking.answered.Sub(tl.booking.sent) }},
}
