package redisstore

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/internal/redistest"
)

// recorder is a slog.Handler that keeps every record, safe for go-redis's
// goroutines.
type recorder struct {
	mu  sync.Mutex
	all []slog.Record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, r.Clone())
	return nil
}

// line is a record's level, message and attributes, as text.
type line struct {
	level, msg, source, suppressed string
}

// lines returns the records so far.
func (h *recorder) lines() []line {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []line
	for _, r := range h.all {
		l := line{level: r.Level.String(), msg: r.Message}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "source":
				l.source = a.Value.String()
			case "suppressed":
				l.suppressed = a.Value.String()
			}
			return true
		})
		out = append(out, l)
	}
	return out
}

// TestLoggerGate: go-redis's lines become slog records (message, level,
// source) through the gate: 2 per second let through, the rest counted in
// the next record's suppressed.
func TestLoggerGate(t *testing.T) {
	var rec recorder
	clk := &clock.Manual{T: 100}
	l := NewLogger(LogConfig{Logger: slog.New(&rec), LinesPerSecond: 2, Clock: clk})
	for i := range 10 {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v\n", i, "refused")
	}
	clk.Advance(1)
	l.Printf(context.Background(), "redis: %s", "again")
	want := []line{
		{"WARN", "redis: connection pool: failed to dial after 0 attempts: refused", "go-redis", "0"},
		{"WARN", "redis: connection pool: failed to dial after 1 attempts: refused", "go-redis", "0"},
		{"WARN", "redis: again", "go-redis", "8"},
	}
	if got := rec.lines(); !slices.Equal(got, want) {
		t.Fatalf("records %+v, want %+v (2 of 10, then 1 counting the 8 dropped)", got, want)
	}
	off := NewLogger(LogConfig{Logger: slog.New(&rec), LinesPerSecond: -1})
	off.Printf(context.Background(), "dropped")
	if n := len(rec.lines()); n != 3 {
		t.Errorf("a negative LinesPerSecond let a line through (%d records)", n)
	}
}

// TestInstallLogger: installed, the Logger receives what go-redis itself
// prints when it cannot dial, as a structured record.
func TestInstallLogger(t *testing.T) {
	var rec recorder
	InstallLogger(LogConfig{Logger: slog.New(&rec), LinesPerSecond: 100})
	t.Cleanup(func() { redis.SetLogger(quietLogger{}) })
	// Nothing listens on a port that was just free.
	addr := redistest.FreeAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatalf("PING to %s succeeded: something listens there", addr)
	}
	for _, l := range rec.lines() {
		if strings.Contains(l.msg, "failed to dial") && l.source == "go-redis" {
			return
		}
	}
	t.Fatalf("no go-redis dial failure among the records: %+v", rec.lines())
}
