package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// waitOKPause is how long WaitOK waits between two asks.
const waitOKPause = 50 * time.Millisecond

// WaitOK asks url until it answers 200 OK, for up to timeout: a process that was just started
// is up. It gives up early when ctx ends, or when gone, which may be nil, returns an error: the
// process that should answer is gone, and that error says how.
func WaitOK(ctx context.Context, url string, timeout time.Duration, gone func() error) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if gone != nil {
			if err := gone(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s", url, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(waitOKPause):
		}
	}
}
