package fakestripe

// SetBeforeChargeHook makes every charge request call hook once it holds its idempotency key
// and before it executes, so that a test can keep one in flight deterministically.
func (s *Server) SetBeforeChargeHook(hook func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeChargeRun = hook
}
