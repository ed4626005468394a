package pgcluster

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
)

// serverLogTailBytes is how much of the server's output is kept for error messages: enough for
// the few lines before a failed start, which are the ones that say why.
const serverLogTailBytes = 16 << 10

// serverLog receives the output of initdb and postgres. It keeps the tail, so that a failure can
// say what the server said, and hands each line to the logger at debug level.
type serverLog struct {
	logger *slog.Logger

	mu      sync.Mutex
	tail    []byte
	partial []byte // a line not yet ended by a newline
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.tail = append(l.tail, p...)
	if extra := len(l.tail) - serverLogTailBytes; extra > 0 {
		l.tail = l.tail[:copy(l.tail, l.tail[extra:])]
	}

	if !l.logger.Enabled(context.Background(), slog.LevelDebug) {
		return len(p), nil
	}
	l.partial = append(l.partial, p...)
	for {
		line, rest, found := bytes.Cut(l.partial, []byte("\n"))
		if !found {
			break
		}
		l.logger.Debug("Postgres: server log", slog.String("line", string(line)))
		l.partial = append(l.partial[:0], rest...)
	}
	return len(p), nil
}

// Tail returns the last lines the server wrote.
func (l *serverLog) Tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.tail)
}
