package api

import "time"

// StopLimitsClock stops the clock of s's limits at at: no budget refills from then on, so that a
// test counts exactly the tokens it spent, however long its requests take.
func (s *Server) StopLimitsClock(at time.Time) { s.limiter.now = func() time.Time { return at } }

// SetReadTimeout replaces the bound on s's own reads (dbReadTimeout), so that a test can hold a
// read at a lock for as long as it sends other requests, however loaded the machine.
func (s *Server) SetReadTimeout(d time.Duration) { s.readTimeout = d }
