// Command chaos is the soak test of "Murphy in action": it runs the whole service as real
// processes, books and cancels rides from many concurrent clients while faults fire at random
// and Stripe refunds and disputes charges behind its back (told by webhook), then stops the
// faults, lets the system settle, and holds the result to every invariant of package
// invariants. docs/testing.md's "The chaos soak and the invariant checker" says what it breaks, what
// it checks and how to run it.
//
// It prints a progress line every few seconds and a summary table at the end, keeps the
// processes' output in a log file whose path it prints, and exits non-zero on any violation,
// or if the stack could not be brought up.
package main
