// Package stagedat carries, in a River job's metadata, when the job was staged: the start of
// the transaction that staged it (staged_jobs.created_at), which for a receipt is the ride's
// last atomic phase, moments before the rider's 201. The enqueuer writes it as it hands the job
// to River, since the staged row is deleted then; the worker reads it to measure how long a
// receipt took from the booking to the mail server (rocketrides_receipt_latency_seconds).
package stagedat

import (
	"encoding/json"
	"fmt"
	"time"
)

// Key is the metadata key. River keeps metadata as the inserter wrote it and reserves no key
// of this prefix.
const Key = "rocketrides_staged_at"

// Add returns metadata, a JSON object (or empty, meaning {}), with Key set to stagedAt.
func Add(metadata []byte, stagedAt time.Time) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil {
			return nil, fmt.Errorf("error decoding job metadata: %w", err)
		}
	}
	value, err := json.Marshal(stagedAt.UTC())
	if err != nil {
		return nil, fmt.Errorf("error encoding staged time: %w", err)
	}
	fields[Key] = value
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("error encoding job metadata: %w", err)
	}
	return out, nil
}

// Read returns the time Add wrote into metadata, and false when there is none: a job inserted
// by something other than the enqueuer, or before it wrote this.
func Read(metadata []byte) (time.Time, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &fields); err != nil {
		return time.Time{}, false
	}
	var stagedAt time.Time
	if raw, ok := fields[Key]; !ok || json.Unmarshal(raw, &stagedAt) != nil {
		return time.Time{}, false
	}
	return stagedAt, true
}
