package health

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/clock"
)

// Rand is a source of uniform random numbers in [0, 1); *rng.Mulberry32
// satisfies it. The Checker draws one number per check (the jitter) under
// its lock, so a Rand need not be safe for concurrent use.
type Rand interface {
	Float64() float64
}

type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// CheckerOptions are the Checker's collaborators; every field is optional.
type CheckerOptions struct {
	// Name labels the Checker's log lines and metrics (checker="Name").
	Name string
	// OnChange is told of every change of a target's state: healthy after
	// Rise passes in a row (or a first pass), unhealthy after Fall
	// failures in a row (or a first failure), with a short reason. It is
	// also called once for every target SetTargets adds, with the target's
	// initial state (ActiveConfig.InitiallyHealthy) and reason "added", so
	// that whatever it feeds starts in step. Calls are serialised (never
	// two at once) and in order for each target; no call for a target
	// comes after the SetTargets that removed it has returned. OnChange
	// may call Healthy, Stats, Targets and Start, but must not call
	// SetTargets or Stop (they would wait for it).
	OnChange func(addr string, healthy bool, reason string)
	// Logger receives one line per state change (Warn when a target goes
	// unhealthy, Info when it comes back), never one per check. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Clock gives the times fed to each target's Tracker. Nil means
	// clock.NewReal(). Waits between checks use real timers regardless.
	Clock clock.Clock
	// Rand draws the jitter. Nil means math/rand/v2's global generator.
	Rand Rand
}

// Checker runs active health checks: one goroutine per target, each
// checking its target every ActiveConfig.Interval (with jitter) and
// feeding the results to the target's Tracker. The number of goroutines is
// bounded by the number of targets, plus removed targets whose check is
// still returning (a check returns as soon as its context is cancelled
// when the Check honours it, as those of this package do). A Checker is
// safe for concurrent use; its lock is taken once per check, never on a
// request path.
type Checker struct {
	check    Check
	cfg      ActiveConfig // normalized
	name     string
	onChange func(addr string, healthy bool, reason string)
	log      *slog.Logger
	clk      clock.Clock

	cbMu sync.Mutex // serialises OnChange calls; taken before mu, never after

	mu      sync.Mutex
	rnd     Rand               // guarded by mu
	targets map[string]*target // guarded by mu
	running bool               // guarded by mu
	totals  counters           // guarded by mu: all targets, removed ones included
}

// counters are the Checker's totals, for metrics.
type counters struct {
	passed, failed        uint64
	toHealthy, toUnhealth uint64
}

// target is one checked address.
type target struct {
	addr   string
	tr     Tracker            // guarded by Checker.mu
	cancel context.CancelFunc // guarded by Checker.mu: non-nil while a goroutine runs
	done   chan struct{}      // guarded by Checker.mu: closed when that goroutine ends
	gone   atomic.Bool        // removed by SetTargets (set under cbMu and mu)
}

// NewChecker returns a stopped Checker with no targets that checks with
// check under cfg, or a *ConfigError if cfg (or check, when it has a
// Validate method, as *HTTPCheck does) is invalid.
func NewChecker(check Check, cfg ActiveConfig, opts CheckerOptions) (*Checker, error) {
	if check == nil {
		return nil, badConfig("check", "must not be nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if v, ok := check.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	c := &Checker{check: check, cfg: cfg.normalized(), name: opts.Name, onChange: opts.OnChange,
		log: opts.Logger, clk: opts.Clock, rnd: opts.Rand, targets: map[string]*target{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.clk == nil {
		c.clk = clock.NewReal()
	}
	if c.rnd == nil {
		c.rnd = globalRand{}
	}
	return c, nil
}

// SetTargets replaces the set of checked addresses. Targets that remain
// keep their state and counters; new ones start in the initial state
// (OnChange is called for each with reason "added") and, if the Checker
// is running, get their goroutine at once; removed ones have their
// goroutine and in-flight check cancelled (SetTargets does not wait for
// them to end) and report nothing more. Duplicates count once; the empty
// string is ignored.
func (c *Checker) SetTargets(addrs []string) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	now := c.clk.Now()
	keep := make(map[string]bool, len(addrs))
	var added []*target
	c.mu.Lock()
	for _, a := range addrs {
		if a == "" || keep[a] {
			continue
		}
		keep[a] = true
		if _, ok := c.targets[a]; ok {
			continue
		}
		t := &target{addr: a, tr: newTracker(now, c.cfg)}
		c.targets[a] = t
		added = append(added, t)
		if c.running {
			c.spawn(t)
		}
	}
	for a, t := range c.targets {
		if !keep[a] {
			t.gone.Store(true)
			if t.cancel != nil {
				t.cancel()
				t.cancel, t.done = nil, nil
			}
			delete(c.targets, a)
		}
	}
	c.mu.Unlock()
	if c.onChange != nil {
		for _, t := range added {
			c.onChange(t.addr, c.cfg.InitiallyHealthy, "added")
		}
	}
}

// Start starts one goroutine per target; it does nothing if the Checker
// is running. A stopped Checker may be started again: targets keep their
// state.
func (c *Checker) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	c.running = true
	for _, t := range c.targets {
		c.spawn(t)
	}
}

// Stop cancels every goroutine and in-flight check and waits for them to
// end (a Check that ignores its context delays Stop until it returns).
// Results of cancelled checks are not recorded. Stop does nothing if the
// Checker is not running.
func (c *Checker) Stop() {
	c.mu.Lock()
	c.running = false
	var dones []chan struct{}
	for _, t := range c.targets {
		if t.cancel != nil {
			t.cancel()
			dones = append(dones, t.done)
			t.cancel, t.done = nil, nil
		}
	}
	c.mu.Unlock()
	for _, d := range dones {
		<-d
	}
}

// spawn starts t's goroutine; c.mu is held.
func (c *Checker) spawn(t *target) {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go c.run(ctx, t, t.done, c.cfg.FirstWait(c.rnd.Float64()))
}

// run checks t until ctx is cancelled.
func (c *Checker) run(ctx context.Context, t *target, done chan struct{}, first float64) {
	defer close(done)
	timer := time.NewTimer(clock.Duration(first))
	defer timer.Stop()
	timeout := clock.Duration(c.cfg.Timeout)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.check.Check(cctx, t.addr)
		if err == nil && cctx.Err() != nil {
			err = cctx.Err() // a check that passed after its timeout failed
		}
		cancel()
		if ctx.Err() != nil {
			return // stopped or removed: the result is not recorded
		}
		wait := c.record(t, err)
		timer.Reset(max(0, clock.Duration(wait)-time.Since(start)))
	}
}

// record feeds one result to t's Tracker, reports a change, and returns
// the wait until t's next check.
func (c *Checker) record(t *target, err error) (wait float64) {
	now := c.clk.Now()
	c.mu.Lock()
	wait = c.cfg.Wait(c.rnd.Float64())
	if t.gone.Load() {
		c.mu.Unlock()
		return wait
	}
	ok := err == nil
	if ok {
		c.totals.passed++
	} else {
		c.totals.failed++
	}
	changed := t.tr.Record(now, ok)
	var reason string
	healthy := t.tr.Healthy()
	if changed {
		reason = t.tr.reason(err)
		if healthy {
			c.totals.toHealthy++
		} else {
			c.totals.toUnhealth++
		}
	}
	c.mu.Unlock()
	if changed {
		c.notify(t, healthy, reason)
	}
	return wait
}

// notify logs a change and calls OnChange, unless t was removed meanwhile.
func (c *Checker) notify(t *target, healthy bool, reason string) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	if t.gone.Load() {
		return
	}
	if healthy {
		c.log.LogAttrs(context.Background(), slog.LevelInfo, "health: target healthy",
			slog.String("checker", c.name), slog.String("addr", t.addr), slog.String("reason", reason))
	} else {
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "health: target unhealthy",
			slog.String("checker", c.name), slog.String("addr", t.addr), slog.String("reason", reason))
	}
	if c.onChange != nil {
		c.onChange(t.addr, healthy, reason)
	}
}

// Healthy reports the state of addr and whether it is a target.
func (c *Checker) Healthy(addr string) (healthy, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.targets[addr]
	if !ok {
		return false, false
	}
	return t.tr.Healthy(), true
}

// Stats returns the state and counters of addr's Tracker, and whether addr
// is a target; its times are on CheckerOptions.Clock's timeline. Counters of a removed target are gone with it (the
// Collector's totals keep them).
func (c *Checker) Stats(addr string) (TrackerStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.targets[addr]
	if !ok {
		return TrackerStats{}, false
	}
	return t.tr.Stats(), true
}

// Targets returns the number of targets and how many of them are healthy.
func (c *Checker) Targets() (total, healthy int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.targets {
		if t.tr.Healthy() {
			healthy++
		}
	}
	return len(c.targets), healthy
}
