package overload

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"
)

// State is the Guard's reaction to its own heap and goroutines.
type State int32

const (
	// Normal: connections are admitted and kept alive.
	Normal State = iota
	// KeepAliveOff: a soft threshold is crossed; the OnKeepAlive hooks
	// were told to turn keep-alive off.
	KeepAliveOff
	// Refuse: a hard threshold is crossed; keep-alive stays off and Admit
	// refuses every new connection (ReasonOverload).
	Refuse
	numStates
)

// String returns "normal", "keepalive-off" or "refuse".
func (s State) String() string {
	switch s {
	case Normal:
		return "normal"
	case KeepAliveOff:
		return "keepalive-off"
	case Refuse:
		return "refuse"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// heapMetric is the runtime/metrics name Run reads (see the package doc).
const heapMetric = "/gc/heap/live:bytes"

// sampler is the state machine's memory: each measure's own level, and
// the last sample.
type sampler struct {
	heapLevel, goLevel State
	since              float64
	heap               uint64
	goroutines         int
	transitions        [numStates]uint64
}

func (s *sampler) state() State { return max(s.heapLevel, s.goLevel) }

// level is a measure's next level from cur: up at a threshold, down only
// below 90% of the threshold of the level it is in. A threshold of 0 is
// off.
func level(cur State, v, soft, hard uint64) State {
	switch {
	case hard > 0 && (v >= hard || cur == Refuse && v >= hard-hard/10):
		return Refuse
	case soft > 0 && (v >= soft || cur >= KeepAliveOff && v >= soft-soft/10):
		return KeepAliveOff
	}
	return Normal
}

// OnKeepAlive registers f, called with false when the Guard leaves Normal
// and with true when it comes back to it (the gateway turns keep-alive off
// and on on every proxy.Server). Hooks run in the goroutine that called
// Sample, after the transition, with no lock held, in registration order.
// A hook registered while keep-alive is off is not called for that past
// transition: read KeepAlive first.
func (g *Guard) OnKeepAlive(f func(on bool)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hooks = append(g.hooks[:len(g.hooks):len(g.hooks)], f)
}

// State returns the current state.
func (g *Guard) State() State { return State(g.state.Load()) }

// KeepAlive reports whether keep-alive is on: the state is Normal.
func (g *Guard) KeepAlive() bool { return g.State() == Normal }

// Sample is one step of the state machine: the measures heap (live bytes)
// and goroutines taken at now. It returns the new state. A transition is
// counted (Stats.Transitions), logged once, and — when keep-alive changes —
// passed to the OnKeepAlive hooks before Sample returns. Run calls it;
// tests call it with the measures they choose. Meant for one goroutine at a
// time: concurrent calls are safe but their hooks may run out of order.
func (g *Guard) Sample(now float64, heap uint64, goroutines int) State {
	set := g.set.Load()
	c := &set.cfg
	g.mu.Lock()
	s := &g.st
	from := s.state()
	s.heapLevel = level(s.heapLevel, heap, c.HeapSoft, c.HeapHard)
	s.goLevel = level(s.goLevel, uint64(max(goroutines, 0)), uint64(c.GoroutinesSoft), uint64(c.GoroutinesHard))
	s.heap, s.goroutines = heap, goroutines
	to := s.state()
	if to == from {
		g.mu.Unlock()
		return to
	}
	s.since = now
	s.transitions[to]++
	g.state.Store(int32(to))
	hooks := g.hooks
	g.mu.Unlock()
	logTransition(c, from, to, heap, goroutines)
	if (from == Normal) != (to == Normal) {
		for _, f := range hooks {
			f(to == Normal)
		}
	}
	return to
}

func logTransition(c *Config, from, to State, heap uint64, goroutines int) {
	args := []any{"from", from.String(), "to", to.String(),
		"heap_bytes", heap, "heap_soft", c.HeapSoft, "heap_hard", c.HeapHard,
		"goroutines", goroutines, "goroutines_soft", c.GoroutinesSoft, "goroutines_hard", c.GoroutinesHard}
	if to > from {
		c.Logger.Warn("overload: state up", args...)
		return
	}
	c.Logger.Info("overload: state down", args...)
}

// Run samples the live heap (runtime/metrics' /gc/heap/live:bytes) and
// runtime.NumGoroutine once at once and then every Config.Interval (the
// current one: SetConfig's takes effect at the next tick), calling Sample
// with Config.Clock's now, until ctx is done.
func (g *Guard) Run(ctx context.Context) {
	m := []metrics.Sample{{Name: heapMetric}}
	every := g.set.Load().cfg.Interval
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		metrics.Read(m)
		var heap uint64
		if m[0].Value.Kind() == metrics.KindUint64 {
			heap = m[0].Value.Uint64()
		}
		g.Sample(g.clk.Now(), heap, runtime.NumGoroutine())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d := g.set.Load().cfg.Interval; d != every {
			every = d
			t.Reset(every)
		}
	}
}
