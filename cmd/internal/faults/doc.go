// Package faults crashes or stalls the API process at the phases' fault points, for the failure
// tests of "Murphy in action". It is armed only by the FAULTS environment variable of the process
// (unset in production: then nothing here runs); no request can arm or change it.
//
// FAULTS is a comma-separated list of point=action rules:
//
//	FAULTS=ride_created=crash              SIGKILL itself right after ride_created commits
//	FAULTS=charge_answered=crash           ... after Stripe charged, before we recorded it
//	FAULTS=charge_answered=stall:5s        pause there for 5 s (a GC pause, a frozen VM)
//	FAULTS=finished=crash@0.2              crash at 1 in 5 requests, at random, after the
//	                                       response was stored and before it was sent
//
// The points are phases.FaultPoint values: ride_created, charge_answered and finished of a
// ride, and cancel_claimed, refund_answered and finished of a cancel.
package faults
