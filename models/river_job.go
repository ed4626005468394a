package models

import (
	"context"
	"fmt"
)

// RiverJobCountByState counts River's jobs in each of states (River's state names): one entry
// per state, 0 if none. It reads River's own table, river_job, because River's client API
// offers no count. River's index on (state, queue, ...) serves the count with an index-only scan
// of the states asked for. So a state left out, such as completed, whose rows are River's whole
// retention window, costs nothing: with 200,000 completed jobs, 0.1 ms rather than 130 ms for a
// scan of the table. A cast through text[] would hide the states from the planner, which would
// then scan the table.
func RiverJobCountByState(ctx context.Context, db DBTX, states []string) (map[string]int64, error) {
	counts, err := countByKey(ctx, db, states, `
		SELECT state::text, count(*)
		FROM river_job
		WHERE state = ANY($1::river_job_state[])
		GROUP BY state`, states)
	if err != nil {
		return nil, fmt.Errorf("error counting River jobs by state: %w", err)
	}
	return counts, nil
}

// RiverJobState returns the state of River's job id, as River names it. It returns ErrNotFound
// if there is no such job.
func RiverJobState(ctx context.Context, db DBTX, id int64) (string, error) {
	var state string
	err := db.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, id).Scan(&state)
	if err != nil {
		return "", fmt.Errorf("error reading the state of River job %d: %w", id, notFound(err))
	}
	return state, nil
}
