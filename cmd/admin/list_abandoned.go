package main

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// listAbandoned shows the requests the system gave up on, newest first, so that an operator can
// find out what became of each (was the ride charged? does the rider know?) and put it right.
func listAbandoned(ctx context.Context, args []string) error {
	return runList(ctx, "list-abandoned", args, "the newest", models.AbandonedRequestList, abandonedFormat)
}

var abandonedFormat = listFormat[*models.AbandonedRequest]{
	noun:   "abandoned request",
	id:     func(r *models.AbandonedRequest) any { return r.ID },
	header: []string{"RECORDED", "REASON", "USER", "IDEMPOTENCY KEY", "RECOVERY POINT", "RIDE", "KEY CREATED", "LAST ERROR"},
	cells:  abandonedCells,
	object: abandonedObject,
}

// abandonedRequestJSON is how list-abandoned -json shows one abandoned request.
type abandonedRequestJSON struct {
	ID             int64           `json:"id"`
	RecordedAt     time.Time       `json:"recorded_at"`
	Reason         string          `json:"reason"`
	UserID         int64           `json:"user_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	RecoveryPoint  string          `json:"recovery_point"`
	LastError      *string         `json:"last_error"`
	RequestParams  json.RawMessage `json:"request_params"`
	KeyCreatedAt   time.Time       `json:"key_created_at"`
	KeyLastRunAt   time.Time       `json:"key_last_run_at"`
	RideID         *int64          `json:"ride_id,string"`
}

func abandonedObject(r *models.AbandonedRequest) any {
	return abandonedRequestJSON{
		ID:             r.ID,
		RecordedAt:     r.CreatedAt.UTC(),
		Reason:         r.Reason,
		UserID:         r.UserID,
		IdempotencyKey: r.IdempotencyKey,
		RecoveryPoint:  string(r.RecoveryPoint),
		LastError:      r.LastError,
		RequestParams:  r.RequestParams,
		KeyCreatedAt:   r.KeyCreatedAt.UTC(),
		KeyLastRunAt:   r.KeyLastRunAt.UTC(),
		RideID:         r.RideID,
	}
}

// maxTableErrorLen keeps a table row on one screen line; -json shows the whole error.
const maxTableErrorLen = 60

func abandonedCells(r *models.AbandonedRequest) []string {
	ride, lastError := "-", "-"
	if r.RideID != nil {
		ride = strconv.FormatInt(*r.RideID, 10)
	}
	if r.LastError != nil {
		lastError = oneLine(*r.LastError)
		if runes := []rune(lastError); len(runes) > maxTableErrorLen {
			lastError = string(runes[:maxTableErrorLen-1]) + "…"
		}
	}
	return []string{r.CreatedAt.UTC().Format(time.RFC3339), r.Reason, strconv.FormatInt(r.UserID, 10), r.IdempotencyKey,
		string(r.RecoveryPoint), ride, r.KeyCreatedAt.UTC().Format(time.RFC3339), lastError}
}
