package main

import (
	"bytes"
	"sync"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
)

// lineWriter writes what it is given to out a whole line at a time under label, for a program
// that dev runs outside its supervisor (Jaeger), whose output then reads like the others'.
type lineWriter struct {
	out   *supervisor.PrefixWriter
	label string

	mu      sync.Mutex
	pending []byte // the start of a line not yet ended
}

func newLineWriter(out *supervisor.PrefixWriter, label string) *lineWriter {
	return &lineWriter{out: out, label: label}
}

// Write writes every line that p ends, and keeps the rest for the next call.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.out.Line(w.label, string(w.pending[:i]))
		w.pending = w.pending[i+1:]
	}
}
