package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// listAbandoned shows the requests the system gave up on, newest first, so that an operator can
// find out what became of each (was the ride charged? does the rider know?) and put it right.
// A table by default, for reading; -json prints one object per line, for jq and scripts.
func listAbandoned(ctx context.Context, args []string) error {
	return runList(ctx, "list-abandoned", args, "the newest", models.AbandonedRequestList,
		writeAbandonedTable, writeAbandonedJSON)
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

func writeAbandonedJSON(w io.Writer, requests []*models.AbandonedRequest) error {
	enc := json.NewEncoder(w)
	for _, r := range requests {
		err := enc.Encode(abandonedRequestJSON{
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
		})
		if err != nil {
			return fmt.Errorf("error writing abandoned request %d: %w", r.ID, err)
		}
	}
	return nil
}

// maxTableErrorLen keeps a table row on one screen line; -json shows the whole error.
const maxTableErrorLen = 60

func writeAbandonedTable(w io.Writer, requests []*models.AbandonedRequest) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RECORDED\tREASON\tUSER\tIDEMPOTENCY KEY\tRECOVERY POINT\tRIDE\tKEY CREATED\tLAST ERROR")
	for _, r := range requests {
		ride, lastError := "-", "-"
		if r.RideID != nil {
			ride = strconv.FormatInt(*r.RideID, 10)
		}
		if r.LastError != nil {
			// One line per request: an error's own line breaks and tabs would break the table.
			lastError = strings.Join(strings.Fields(*r.LastError), " ")
			if runes := []rune(lastError); len(runes) > maxTableErrorLen {
				lastError = string(runes[:maxTableErrorLen-1]) + "…"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			r.CreatedAt.UTC().Format(time.RFC3339), r.Reason, r.UserID, r.IdempotencyKey,
			r.RecoveryPoint, ride, r.KeyCreatedAt.UTC().Format(time.RFC3339), lastError)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("error writing abandoned requests: %w", err)
	}
	return nil
}
