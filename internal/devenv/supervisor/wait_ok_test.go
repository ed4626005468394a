package supervisor_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

func TestWaitOK(t *testing.T) {
	t.Parallel()

	t.Run("AnswersOKAfterAWhile", func(t *testing.T) {
		t.Parallel()
		var asked atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if asked.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		t.Cleanup(srv.Close)
		if err := supervisor.WaitOK(t.Context(), srv.URL, 10*time.Second, nil); err != nil {
			t.Fatalf("want the third answer, a 200, to end the wait, got %v", err)
		}
		if n := asked.Load(); n != 3 {
			t.Fatalf("want 3 asks, got %d", n)
		}
	})

	t.Run("GivesUpWhenGone", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		gone := errors.New("the process exited")
		if err := supervisor.WaitOK(t.Context(), srv.URL, time.Minute, func() error { return gone }); !errors.Is(err, gone) {
			t.Fatalf("want the gone error, got %v", err)
		}
	})

	t.Run("GivesUpAfterTimeout", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		if err := supervisor.WaitOK(t.Context(), srv.URL, 200*time.Millisecond, nil); err == nil {
			t.Fatal("want an error from a URL that never answers 200")
		}
	})
}
