package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/clock"
)

// syncBuffer is a bytes.Buffer safe for go-redis's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON records written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestLoggerGate: go-redis's lines become slog records (message, level,
// source) through the gate: 2 per second let through, the rest counted in
// the next record's suppressed.
func TestLoggerGate(t *testing.T) {
	var buf syncBuffer
	clk := &clock.Manual{T: 100}
	l := NewLogger(LogConfig{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), LinesPerSecond: 2, Clock: clk})
	for i := range 10 {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v\n", i, "refused")
	}
	clk.Advance(1)
	l.Printf(context.Background(), "redis: %s", "again")
	recs := buf.records(t)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3 (2 of 10, then 1): %v", len(recs), recs)
	}
	want := []struct {
		msg        string
		suppressed float64
	}{
		{"redis: connection pool: failed to dial after 0 attempts: refused", 0},
		{"redis: connection pool: failed to dial after 1 attempts: refused", 0},
		{"redis: again", 8},
	}
	for i, w := range want {
		r := recs[i]
		if r["msg"] != w.msg || r["level"] != "WARN" || r["source"] != "go-redis" || r["suppressed"] != w.suppressed {
			t.Errorf("record %d: %v, want msg %q, level WARN, source go-redis, suppressed %v", i, r, w.msg, w.suppressed)
		}
	}
	{
		off := NewLogger(LogConfig{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), LinesPerSecond: -1})
		off.Printf(context.Background(), "dropped")
		if n := len(buf.records(t)); n != 3 {
			t.Errorf("a negative LinesPerSecond let a line through (%d records)", n)
		}
	}
}

// TestInstallLogger: installed, the Logger receives what go-redis itself
// prints when it cannot dial, as a structured record.
func TestInstallLogger(t *testing.T) {
	var buf syncBuffer
	InstallLogger(LogConfig{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), LinesPerSecond: 100})
	t.Cleanup(func() { redis.SetLogger(quietLogger{}) })
	// Nothing listens on a port that was just free.
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t, false))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatalf("PING to %s succeeded: something listens there", addr)
	}
	for _, r := range buf.records(t) {
		if msg, _ := r["msg"].(string); strings.Contains(msg, "failed to dial") && r["source"] == "go-redis" {
			return
		}
	}
	t.Fatalf("no go-redis dial failure among the records: %v", buf.records(t))
}
