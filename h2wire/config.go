package h2wire

import (
	"time"

	"github.com/spillwayhq/spillway/clock"
)

// Config bounds one server connection. The zero value (or a nil *Config)
// means every default; a value out of its range is clamped to it.
type Config struct {
	// MaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS: the streams
	// the client may have open at once (a stream counts until its handler
	// has returned). One more is refused with RST_STREAM REFUSED_STREAM.
	// Default 250, range 1 to 10000.
	MaxConcurrentStreams uint32
	// StreamWindow is the receive window of each stream: the request body
	// bytes a stream may have buffered, unread by its handler. Default
	// 256 KiB, range 64 KiB (65535, the protocol's initial window) to 16 MiB.
	StreamWindow int32
	// ConnWindow is the connection's receive window: the body bytes all its
	// streams may have buffered together. Default 1 MiB, range 64 KiB to
	// 1 GiB; never below StreamWindow.
	ConnWindow int32
	// MaxFrameSize is SETTINGS_MAX_FRAME_SIZE, the largest frame payload we
	// accept (we send frames no larger than the peer's). Default 16384,
	// range 16384 to 1 MiB.
	MaxFrameSize uint32
	// MaxHeaderListSize is SETTINGS_MAX_HEADER_LIST_SIZE: the size of a
	// request's header list (RFC 9113 6.5.2: name + value + 32 per field).
	// A request over it is answered 431 and its handler never runs; a
	// header block whose encoded frames pass twice this size ends the
	// connection with ENHANCE_YOUR_CALM (a CONTINUATION flood). Default
	// 64 KiB, range 1 KiB to 1 MiB.
	MaxHeaderListSize uint32

	// IdleTimeout closes (GOAWAY NO_ERROR) a connection that has had no
	// open stream for this long. Default 5 minutes.
	IdleTimeout time.Duration
	// SettingsTimeout bounds the time from the connection's start to the
	// client's preface, its SETTINGS and its acknowledgement of ours; past
	// it the connection ends with SETTINGS_TIMEOUT. Default 10 s.
	SettingsTimeout time.Duration
	// WriteTimeout bounds every write to the connection (a client that
	// stops reading) and the time a Stream.Write waits for the client's
	// flow-control window to open. Default 30 s.
	WriteTimeout time.Duration
	// ReadTimeout bounds the time a Stream.Read waits for the client's
	// next DATA frame; past it the stream is reset with CANCEL. Default 60 s.
	ReadTimeout time.Duration

	// MaxResetsPerSecond and ResetBurst bound the streams a client may end
	// early (CVE-2023-44487, rapid reset): a token bucket of ResetBurst
	// tokens refilled at MaxResetsPerSecond, one token per RST_STREAM the
	// client sends on an open stream and per stream we refuse. An empty
	// bucket ends the connection with GOAWAY ENHANCE_YOUR_CALM. Defaults
	// 100 per second and 400.
	MaxResetsPerSecond float64
	ResetBurst         float64

	// Pool runs the handlers. Nil means a package-wide pool of at most
	// DefaultMaxWorkers workers that idle out after DefaultWorkerIdle.
	Pool *Pool
	// Clock gives the reset bucket its time. Nil means clock.NewReal().
	Clock clock.Clock
}

// Defaults and bounds of Config.
const (
	DefaultMaxConcurrentStreams = 250
	DefaultStreamWindow         = 256 << 10
	DefaultConnWindow           = 1 << 20
	DefaultMaxFrameSize         = 16384
	DefaultMaxHeaderListSize    = 64 << 10
	DefaultIdleTimeout          = 5 * time.Minute
	DefaultSettingsTimeout      = 10 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
	DefaultReadTimeout          = 60 * time.Second
	DefaultMaxResetsPerSecond   = 100
	DefaultResetBurst           = 400

	minWindow = 65535
)

// resolve returns cfg with defaults and bounds applied.
func (cfg *Config) resolve() Config {
	var r Config
	if cfg != nil {
		r = *cfg
	}
	r.MaxConcurrentStreams = clampU(r.MaxConcurrentStreams, DefaultMaxConcurrentStreams, 1, 10000)
	r.StreamWindow = int32(clampU(uint32(max(r.StreamWindow, 0)), DefaultStreamWindow, minWindow, 16<<20))
	r.ConnWindow = int32(clampU(uint32(max(r.ConnWindow, 0)), DefaultConnWindow, minWindow, 1<<30))
	r.ConnWindow = max(r.ConnWindow, r.StreamWindow)
	r.MaxFrameSize = clampU(r.MaxFrameSize, DefaultMaxFrameSize, 16384, 1<<20)
	r.MaxHeaderListSize = clampU(r.MaxHeaderListSize, DefaultMaxHeaderListSize, 1<<10, 1<<20)
	r.IdleTimeout = orDuration(r.IdleTimeout, DefaultIdleTimeout)
	r.SettingsTimeout = orDuration(r.SettingsTimeout, DefaultSettingsTimeout)
	r.WriteTimeout = orDuration(r.WriteTimeout, DefaultWriteTimeout)
	r.ReadTimeout = orDuration(r.ReadTimeout, DefaultReadTimeout)
	if r.MaxResetsPerSecond <= 0 {
		r.MaxResetsPerSecond = DefaultMaxResetsPerSecond
	}
	if r.ResetBurst < 1 {
		r.ResetBurst = DefaultResetBurst
	}
	if r.Pool == nil {
		r.Pool = defaultPool()
	}
	if r.Clock == nil {
		r.Clock = clock.NewReal()
	}
	return r
}

// clampU returns v, or def when v is 0, kept within [lo, hi].
func clampU(v, def, lo, hi uint32) uint32 {
	if v == 0 {
		v = def
	}
	return min(max(v, lo), hi)
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// resetBucket is the rapid-reset token bucket; now in seconds.
type resetBucket struct {
	tokens, burst, rate, last float64
}

// take spends a token and reports whether one was left.
func (b *resetBucket) take(now float64) bool {
	if now > b.last {
		b.tokens = min(b.burst, b.tokens+float64((now-b.last)*b.rate))
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
