package api

import "time"

// StopLimitsClock stops the clock of s's limits at at: no budget refills from then on, so that a
// test counts exactly the tokens it spent, however long its requests take.
func (s *Server) StopLimitsClock(at time.Time) { s.limiter.now = func() time.Time { return at } }
