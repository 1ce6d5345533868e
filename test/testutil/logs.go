package testutil

import (
	"context"
	"log/slog"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record it is handed, at
// every level, for a test to count. Attributes and groups added with
// With and WithGroup are dropped: tests count records by level and
// message. The zero value is ready to use: slog.New(&LogRecorder{}).
type LogRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

// Enabled reports true for every level.
func (*LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of r.
func (l *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// WithAttrs returns l itself; the attributes are dropped.
func (l *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l itself; the group is dropped.
func (l *LogRecorder) WithGroup(string) slog.Handler { return l }

// Count returns how many records are at level with the message msg exactly.
func (l *LogRecorder) Count(level slog.Level, msg string) int {
	return l.count(func(r slog.Record) bool { return r.Level == level && r.Message == msg })
}

// CountLevel returns how many records are at level, whatever their message.
func (l *LogRecorder) CountLevel(level slog.Level) int {
	return l.count(func(r slog.Record) bool { return r.Level == level })
}

func (l *LogRecorder) count(match func(slog.Record) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if match(r) {
			n++
		}
	}
	return n
}
