package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// idlePollInterval is how often RunOnce looks for jobs left to start: short, as it only delays
// the exit of a run whose work is done.
const idlePollInterval = 100 * time.Millisecond

// onceCounts is the line RunOnce prints (the worker's -once): how the jobs it worked ended. Each attempt is counted
// once: failed are attempts that failed and will be retried later, discarded are jobs that failed
// for the last time, cancelled are jobs given up as pointless (a ride that no longer exists).
type onceCounts struct {
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Discarded int `json:"discarded"`
	Cancelled int `json:"cancelled"`
}

// RunOnce works jobs until none is available to start, stops River (which waits for the running
// ones; see stop), and prints the counts to out as one JSON line. ctx ending (a signal) ends it
// early, counts still printed.
func (r *Runner) RunOnce(ctx context.Context, out io.Writer) error {
	// Subscribed before Start so that no event is missed; River closes the channel when it has
	// stopped and delivered the last one. Counting runs alongside, as River drops events that
	// would overflow the channel's buffer.
	events, unsubscribe := r.client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	countsc := make(chan onceCounts, 1)
	go func() {
		var counts onceCounts
		for ev := range events {
			switch {
			case ev.Kind == river.EventKindJobCompleted:
				counts.Completed++
			case ev.Kind == river.EventKindJobCancelled:
				counts.Cancelled++
			case ev.Job.State == rivertype.JobStateDiscarded:
				counts.Discarded++
			default:
				counts.Failed++
			}
		}
		countsc <- counts
	}()

	if err := r.start(ctx); err != nil {
		unsubscribe()
		return err
	}
	waitErr := waitUntilNothingAvailable(ctx, r.client)
	stopErr := r.stop()
	unsubscribe() // a no-op when River closed the channel already, as it does on a clean stop

	if err := json.NewEncoder(out).Encode(<-countsc); err != nil {
		return errors.Join(waitErr, stopErr, fmt.Errorf("error writing counts: %w", err))
	}
	return errors.Join(waitErr, stopErr)
}

// waitUntilNothingAvailable returns once no job of the queue is available and due: every job
// there was is running (Stop waits for those) or done. It returns early when ctx ends.
func waitUntilNothingAvailable(ctx context.Context, client *river.Client[pgx.Tx]) error {
	params := river.NewJobListParams().
		Queues(river.QueueDefault).
		States(rivertype.JobStateAvailable).
		Where("scheduled_at <= now()").
		First(1)
	for {
		res, err := client.JobList(ctx, params)
		if ctx.Err() != nil {
			return nil // stopping on a signal is no error
		}
		if err != nil {
			return fmt.Errorf("error looking for available jobs: %w", err)
		}
		if len(res.Jobs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(idlePollInterval):
		}
	}
}
