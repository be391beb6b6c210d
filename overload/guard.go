package overload

import (
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit"
)

// Defaults of Config.
const (
	// DefaultInterval is how often Run measures the heap and goroutines.
	DefaultInterval = 250 * time.Millisecond
	// FallbackMaxConns is Config.MaxConns's default when the open-file
	// limit cannot be read: half of 1,024, the smallest usual soft limit,
	// so that even there upstream connections and files keep room.
	FallbackMaxConns = 512
)

// Config configures a Guard. Its zero value is a Guard whose only limit is
// the default MaxConns.
type Config struct {
	// MaxConns bounds the client connections open at once over every Gate:
	// 0 means half the process's open-file limit (RLIMIT_NOFILE's soft
	// value, which Go raises to the hard value at start), leaving the other
	// half for upstream connections and files; FallbackMaxConns when that
	// limit cannot be read. Negative means no bound.
	MaxConns int
	// HandshakeRate bounds the TLS connections admitted per second over
	// every Gate, with bursts of max(1, ⌊HandshakeRate⌋); 0 means no
	// bound. A TLS connection beyond it is refused before its handshake.
	HandshakeRate float64
	// HeapSoft and HeapHard are the live heap, in bytes, at or above which
	// the Guard turns keep-alive off (soft) and refuses new connections
	// too (hard); 0 turns a threshold off. With both set, HeapHard must
	// not be below HeapSoft.
	HeapSoft, HeapHard uint64
	// GoroutinesSoft and GoroutinesHard are the same thresholds for the
	// number of goroutines; 0 turns one off, negative is an error.
	GoroutinesSoft, GoroutinesHard int
	// Interval is how often Run measures; 0 means DefaultInterval.
	Interval time.Duration
	// Clock gives Run the instants of its samples and is returned by
	// Guard.Clock for the callers of Admit; nil means clock.NewReal().
	// Fixed by New: SetConfig keeps it.
	Clock clock.Clock
	// Logger receives one line per state transition; nil means
	// slog.Default().
	Logger *slog.Logger
}

// ErrConfig: a Config value is out of range; the error names the field.
var ErrConfig = errors.New("overload: invalid configuration")

type fieldError struct{ field, reason string }

func (e *fieldError) Error() string { return "overload: Config." + e.field + ": " + e.reason }
func (e *fieldError) Unwrap() error { return ErrConfig }

// Guard is the gateway's self-protection over all its listeners. Make one
// with New; it is safe for concurrent use.
type Guard struct {
	clk clock.Clock              // immutable: Config.Clock at New
	set atomic.Pointer[settings] // replaced whole by SetConfig

	open     atomic.Int64
	admitted atomic.Uint64
	refused  [numReasons]atomic.Uint64
	state    atomic.Int32 // a State; written under mu, read anywhere

	mu    sync.Mutex
	gates map[string]*Gate // guarded by mu
	hooks []func(on bool)  // guarded by mu; copied on write, so a copy may be used unlocked
	st    sampler          // guarded by mu
}

// settings are a validated Config and what Admit needs of it; immutable.
type settings struct {
	cfg      Config                                         // defaults filled
	maxConns int64                                          // math.MaxInt64 for no bound
	hs       *ratelimit.Limiter[ratelimit.TokenBucketState] // nil: no bound
}

// New returns a Guard for cfg, or an error wrapping ErrConfig naming the
// first bad field.
func New(cfg Config) (*Guard, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.NewReal()
	}
	g := &Guard{clk: cfg.Clock, gates: map[string]*Gate{}}
	if err := g.SetConfig(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// SetConfig replaces the Guard's configuration (a reload), or returns an
// error wrapping ErrConfig and keeps the old one. Limits apply to
// connections admitted from then on (a lowered MaxConns closes nothing);
// thresholds to the next Sample; Interval to Run's next tick. The
// handshake bucket carries over when HandshakeRate is unchanged, and
// starts full otherwise. The Clock stays New's (listeners hold it):
// Config.Clock is ignored.
func (g *Guard) SetConfig(cfg Config) error {
	cfg.Clock = g.clk
	if err := fill(&cfg); err != nil {
		return err
	}
	s := &settings{cfg: cfg, maxConns: math.MaxInt64}
	if cfg.MaxConns > 0 {
		s.maxConns = int64(cfg.MaxConns)
	}
	old := g.set.Load()
	switch {
	case cfg.HandshakeRate == 0:
	case old != nil && old.cfg.HandshakeRate == cfg.HandshakeRate:
		s.hs = old.hs
	default:
		burst := int(min(max(1, math.Floor(cfg.HandshakeRate)), ratelimit.MaxBurst))
		tb, err := ratelimit.NewTokenBucket(ratelimit.Limit{Rate: cfg.HandshakeRate, Burst: burst})
		if err != nil {
			return &fieldError{"HandshakeRate", err.Error()}
		}
		s.hs = ratelimit.NewLimiter(tb)
	}
	g.set.Store(s)
	return nil
}

// fill validates cfg and applies its defaults.
func fill(cfg *Config) error {
	switch {
	case cfg.HandshakeRate < 0 || math.IsNaN(cfg.HandshakeRate) || math.IsInf(cfg.HandshakeRate, 1):
		return &fieldError{"HandshakeRate", "must be a finite number ≥ 0 (0: no bound), got " + strconv.FormatFloat(cfg.HandshakeRate, 'g', -1, 64)}
	case cfg.HeapSoft > 0 && cfg.HeapHard > 0 && cfg.HeapHard < cfg.HeapSoft:
		return &fieldError{"HeapHard", "must not be below HeapSoft (" + strconv.FormatUint(cfg.HeapSoft, 10) + "), got " + strconv.FormatUint(cfg.HeapHard, 10)}
	case cfg.GoroutinesSoft < 0:
		return &fieldError{"GoroutinesSoft", "must not be negative (0: off), got " + strconv.Itoa(cfg.GoroutinesSoft)}
	case cfg.GoroutinesHard < 0:
		return &fieldError{"GoroutinesHard", "must not be negative (0: off), got " + strconv.Itoa(cfg.GoroutinesHard)}
	case cfg.GoroutinesSoft > 0 && cfg.GoroutinesHard > 0 && cfg.GoroutinesHard < cfg.GoroutinesSoft:
		return &fieldError{"GoroutinesHard", "must not be below GoroutinesSoft (" + strconv.Itoa(cfg.GoroutinesSoft) + "), got " + strconv.Itoa(cfg.GoroutinesHard)}
	case cfg.Interval < 0:
		return &fieldError{"Interval", "must not be negative (0: " + DefaultInterval.String() + "), got " + cfg.Interval.String()}
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = defaultMaxConns()
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

// defaultMaxConns is half the soft open-file limit, or FallbackMaxConns.
func defaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 2 {
		return FallbackMaxConns
	}
	return int(min(rl.Cur/2, math.MaxInt32))
}

// MaxConns returns the bound on connections over every Gate (defaults
// applied); 0 for none.
func (g *Guard) MaxConns() int {
	if m := g.set.Load().maxConns; m != math.MaxInt64 {
		return int(m)
	}
	return 0
}

// Clock returns Config.Clock (defaults applied): the clock whose instants
// Admit expects.
func (g *Guard) Clock() clock.Clock { return g.clk }

// Gate returns the Gate named name, made (without limits) on first use and
// kept across calls, so a listener that survives a reload keeps its counts.
func (g *Guard) Gate(name string) *Gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt, ok := g.gates[name]
	if !ok {
		gt = &Gate{g: g, name: name}
		g.gates[name] = gt
	}
	return gt
}

// RemoveGate forgets the Gate named name (a listener gone from the
// configuration), so the Guard's map stays as small as the configuration.
// Tickets of its open connections stay valid and are counted by the Gate
// they came from; a later Gate(name) makes a new Gate with no counts.
func (g *Guard) RemoveGate(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.gates, name)
}

// Stats are a Guard's counters for metrics.
type Stats struct {
	// State is the current state and Since the instant (Config.Clock) of
	// the sample that entered it (0 before any transition).
	State State
	Since float64
	// Heap and Goroutines are the last sample's measures.
	Heap       uint64
	Goroutines int
	// Transitions counts, per State, the times the Guard entered it.
	Transitions [numStates]uint64
	// Open is the connections admitted and not yet released, over every
	// Gate; MaxConns its bound (0: none).
	Open     int64
	MaxConns int
	// Admitted counts connections admitted by Admit (those SetIP refused
	// later included); Refused counts refusals per Reason, over every
	// Gate (Refused[ReasonNone] stays 0).
	Admitted uint64
	Refused  [numReasons]uint64
}

// Stats returns the counters; each is read atomically, not all at one
// instant.
func (g *Guard) Stats() Stats {
	s := Stats{Open: g.open.Load(), MaxConns: g.MaxConns(), Admitted: g.admitted.Load()}
	for r := range s.Refused {
		s.Refused[r] = g.refused[r].Load()
	}
	g.mu.Lock()
	s.State, s.Since, s.Heap, s.Goroutines, s.Transitions = g.st.state(), g.st.since, g.st.heap, g.st.goroutines, g.st.transitions
	g.mu.Unlock()
	return s
}
