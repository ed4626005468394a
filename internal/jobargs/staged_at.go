package jobargs

import (
	"encoding/json"
	"fmt"
	"time"
)

// StagedAtKey is the key of a River job's metadata that says when the job was staged: the start
// of the transaction that staged it (staged_jobs.created_at). For a receipt that is the ride's
// last atomic phase, moments before the rider's 201. The enqueuer writes it as it hands the job
// to River, since it deletes the staged row then. The worker reads it to time a receipt from the
// booking to the mail server (rocketrides_receipt_latency_seconds). River keeps metadata as the
// inserter wrote it and reserves no key of this prefix.
const StagedAtKey = "rocketrides_staged_at"

// AddStagedAt returns metadata, a JSON object (or empty, meaning {}), with StagedAtKey set to
// stagedAt.
func AddStagedAt(metadata []byte, stagedAt time.Time) ([]byte, error) {
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
	fields[StagedAtKey] = value
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("error encoding job metadata: %w", err)
	}
	return out, nil
}

// StagedAt returns the time AddStagedAt wrote into metadata. It returns false when there is
// none: a job inserted by something other than the enqueuer.
func StagedAt(metadata []byte) (time.Time, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &fields); err != nil {
		return time.Time{}, false
	}
	var stagedAt time.Time
	if raw, ok := fields[StagedAtKey]; !ok || json.Unmarshal(raw, &stagedAt) != nil {
		return time.Time{}, false
	}
	return stagedAt, true
}
