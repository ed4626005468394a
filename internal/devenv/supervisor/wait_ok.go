package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// waitOKPause is how long WaitOK and WaitFor wait between two tries.
const waitOKPause = 50 * time.Millisecond

// WaitOK asks url until it answers 200 OK, for up to timeout: a process that was just started
// is up. It gives up early when ctx ends, or when gone, which may be nil, returns an error: the
// process that should answer is gone, and that error says how.
func WaitOK(ctx context.Context, url string, timeout time.Duration, gone func() error) error {
	client := &http.Client{Timeout: time.Second}
	return WaitFor(ctx, url+" did not answer 200", timeout, gone, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	})
}

// WaitFor runs try until it succeeds, for up to timeout; then it says that what happened not
// within timeout, with try's last error. It gives up early when ctx ends, or when gone, which
// may be nil, returns an error.
func WaitFor(ctx context.Context, what string, timeout time.Duration, gone func() error, try func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if gone != nil {
			if err := gone(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s within %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(waitOKPause):
		}
	}
}
