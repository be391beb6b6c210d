package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit"
)

// LogConfig configures a Logger. The zero value logs to slog.Default() at
// level Warn, at most one line per second.
type LogConfig struct {
	// Logger receives the lines; nil means slog.Default().
	Logger *slog.Logger
	// LinesPerSecond is the most lines let through per second (a
	// ratelimit.LogGate: a burst of as many, and each line let through
	// counts the ones dropped before it); 0 means 1, negative drops all.
	LinesPerSecond float64
	// Level is the lines' level; nil means slog.LevelWarn.
	Level slog.Leveler
	// Clock paces the gate; nil means clock.NewReal().
	Clock clock.Clock
}

// Logger carries go-redis's own log lines ("redis: connection pool: failed
// to dial after 1 attempts: …", failovers, dropped pub/sub) into log/slog,
// as records with the message and attributes source=go-redis and
// suppressed (lines dropped by the gate since the last one), through a
// rate gate: a dead Redis makes go-redis print a line per failed dial,
// which is one per request when nothing else stops it. It implements
// go-redis's logging interface (Printf); install it with InstallLogger
// or redis.SetLogger. Safe for concurrent use.
type Logger struct {
	log   *slog.Logger       // immutable
	level slog.Leveler       // immutable
	gate  *ratelimit.LogGate // immutable
	clock clock.Clock        // immutable
}

// NewLogger returns a Logger for cfg.
func NewLogger(cfg LogConfig) *Logger {
	l := &Logger{log: cfg.Logger, level: cfg.Level, clock: cfg.Clock}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.level == nil {
		l.level = slog.LevelWarn
	}
	if l.clock == nil {
		l.clock = clock.NewReal()
	}
	perSecond := cfg.LinesPerSecond
	if perSecond == 0 {
		perSecond = 1
	}
	l.gate = ratelimit.NewLogGate(perSecond)
	return l
}

// Printf logs one go-redis line if the gate lets it through (formatting
// it only then).
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	ok, dropped := l.gate.Allow(l.clock.Now())
	if !ok {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimRight(fmt.Sprintf(format, v...), "\n")
	l.log.LogAttrs(ctx, l.level.Level(), msg, slog.String("source", "go-redis"), slog.Uint64("suppressed", dropped))
}

// InstallLogger makes NewLogger(cfg) go-redis's logger and returns it.
// go-redis has one logger for the whole process (redis.SetLogger), shared
// by every client, and no way to read which one is set: so no constructor
// of this package installs it (that would replace a logger of the
// program's own). Call it once at start-up, before making clients, in a
// program that wants go-redis's lines in its slog stream; a later
// redis.SetLogger replaces it.
func InstallLogger(cfg LogConfig) *Logger {
	l := NewLogger(cfg)
	redis.SetLogger(l)
	return l
}
