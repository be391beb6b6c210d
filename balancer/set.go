package balancer

import (
	"maps"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
)

// State is an endpoint's standing in a Set at some instant.
type State uint8

// The states of an endpoint. When several apply, the first in this list
// after Healthy wins: a draining endpoint that also failed its checks reports
// Draining.
const (
	// Healthy: eligible at its full weight.
	Healthy State = iota
	// SlowStarting: eligible, its weight ramping up because it came back into
	// service (or joined the set) less than SetConfig.SlowStart seconds ago.
	SlowStarting
	// Draining: never picked, not even in panic mode; requests already sent
	// to it continue (Set.Drain).
	Draining
	// Ejected: removed by outlier detection until an instant (Set.Eject);
	// picked only in panic mode.
	Ejected
	// Unhealthy: failed its active health checks (Set.SetHealthy); picked
	// only in panic mode.
	Unhealthy
)

// String returns the state's name in lower case, e.g. "slow-starting".
func (st State) String() string {
	switch st {
	case Healthy:
		return "healthy"
	case SlowStarting:
		return "slow-starting"
	case Draining:
		return "draining"
	case Ejected:
		return "ejected"
	case Unhealthy:
		return "unhealthy"
	}
	return "state(" + strconv.Itoa(int(st)) + ")"
}

// Defaults and bounds of SetConfig.
const (
	// DefaultSlowStartMin is the weight fraction at the start of a slow-start
	// ramp (Envoy's min_weight_percent, 10%).
	DefaultSlowStartMin = 0.1
	// DefaultPanicThreshold is the healthy share below which a set balances
	// over all its endpoints (Envoy's healthy_panic_threshold, 50%).
	DefaultPanicThreshold = 0.5
	// DefaultLatencyDecay is the time constant of the latency EWMA in seconds
	// (Finagle's and Linkerd's peak EWMA use 10 s).
	DefaultLatencyDecay = 10.0
	// RampSteps is how many times a snapshot is republished over one
	// slow-start window: effective weights are recomputed every
	// SlowStart/RampSteps seconds (a 30 s window: every 0.6 s) and at the
	// window's end, so between two republications a weight lags its ramp by
	// at most 1/RampSteps of the full weight.
	RampSteps = 50
	// MaxTables bounds the lookup tables a snapshot caches (Snapshot.Table)
	// and the builders SetConfig.Tables may list.
	MaxTables = 8
)

// SetConfig configures a Set. The zero value is ready to use: no slow start,
// panic threshold 50%, latency decay 10 s, endpoints healthy when added.
type SetConfig struct {
	// SlowStart is the length in seconds of the linear weight ramp given to
	// an endpoint that comes back into service — unhealthy or ejected, then
	// healthy again — or that joins the set after the set's first non-empty
	// Update. Endpoints of the first non-empty Update, and endpoints that
	// were never seen in service before their first healthy check, start at
	// full weight (HAProxy: slowstart applies only to servers seen down, not
	// when the balancer itself starts). 0 means no slow start. Must be finite
	// and not negative.
	SlowStart float64
	// SlowStartMin is the weight fraction at the start of the ramp, in
	// (0, 1]; 0 means DefaultSlowStartMin. An endpoint that came back e
	// seconds ago has weight base × max(SlowStartMin, e/SlowStart) (Envoy's
	// slow start with aggression 1).
	SlowStartMin float64
	// PanicThreshold is the healthy share below which every endpoint that is
	// not draining becomes eligible, healthy or not (Envoy's panic mode: when
	// that many endpoints fail their checks, the checks are more likely wrong
	// than the endpoints). The healthy share is healthy ÷ (members −
	// draining), counting slow-starting endpoints as healthy. 0 means
	// DefaultPanicThreshold; a negative value turns panic mode off (with no
	// healthy endpoint, picks then fail with ErrNoEndpoints); at most 1.
	PanicThreshold float64
	// LatencyDecay is the time constant τ in seconds of every endpoint's
	// latency EWMA (EndpointState.Done, PeakEWMA): an estimate halves in
	// about 0.69 τ without samples. 0 means DefaultLatencyDecay. Must be
	// finite and not negative.
	LatencyDecay float64
	// NewUnhealthy makes endpoints join the set Unhealthy, eligible only once
	// SetHealthy reports them healthy (Envoy's behaviour with active checks
	// when new hosts wait for their first check). false: they join Healthy.
	NewUnhealthy bool
	// Tables lists lookup-table builders (ring hash, Maglev) whose tables are
	// built when a snapshot is published with new membership, so that no
	// pick pays for a build; see Snapshot.Table. At most MaxTables; each must
	// be comparable (a pointer).
	Tables []TableBuilder
}

// Validate reports the first value out of range as a *ConfigError.
func (c SetConfig) Validate() error {
	switch {
	case !(c.SlowStart >= 0) || math.IsInf(c.SlowStart, 1):
		return &ConfigError{Field: "SetConfig.SlowStart", Reason: "must be a finite number of seconds ≥ 0, got " + ftoa(c.SlowStart)}
	case !(c.SlowStartMin >= 0 && c.SlowStartMin <= 1):
		return &ConfigError{Field: "SetConfig.SlowStartMin", Reason: "must be in (0, 1] (0 means " + ftoa(DefaultSlowStartMin) + "), got " + ftoa(c.SlowStartMin)}
	case math.IsNaN(c.PanicThreshold) || c.PanicThreshold > 1:
		return &ConfigError{Field: "SetConfig.PanicThreshold", Reason: "must be at most 1 (0 means " + ftoa(DefaultPanicThreshold) + ", negative turns panic mode off), got " + ftoa(c.PanicThreshold)}
	case !(c.LatencyDecay >= 0) || math.IsInf(c.LatencyDecay, 1):
		return &ConfigError{Field: "SetConfig.LatencyDecay", Reason: "must be a finite number of seconds ≥ 0 (0 means " + ftoa(DefaultLatencyDecay) + "), got " + ftoa(c.LatencyDecay)}
	case len(c.Tables) > MaxTables:
		return &ConfigError{Field: "SetConfig.Tables", Reason: "must list at most " + strconv.Itoa(MaxTables) + " builders, got " + strconv.Itoa(len(c.Tables))}
	}
	for i, b := range c.Tables {
		if b == nil {
			return &ConfigError{Field: "SetConfig.Tables[" + strconv.Itoa(i) + "]", Reason: "must not be nil"}
		}
	}
	return nil
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Set is a changing set of endpoints published as immutable snapshots.
// Discovery replaces the list (Update), health checks and outlier detection
// change states (SetHealthy, Eject, Uneject), operators drain (Drain); each
// change that alters what a picker may see builds a new Snapshot in O(n) and
// publishes it with one atomic store. Picks load the current snapshot with
// one atomic load and take no lock (Snapshot, Current).
//
// Every endpoint has one *EndpointState — in-flight counter and latency
// EWMA — that stays the same while its address stays in the set, so
// requests in flight across an update are counted where they belong.
//
// Time is a parameter: methods that may change what is eligible take now,
// seconds on the caller's monotonic timeline; an instant earlier than the
// latest one seen counts as the latest. Effective weights depend on time
// only through slow start and ejection deadlines; a snapshot records the
// instant of its next such change (Snapshot.Due) and Current republishes
// once it has passed.
//
// Safe for concurrent use. Mutations are serialised by a mutex that picks
// never take; memory is O(n) per snapshot for n endpoints, and an old
// snapshot lives as long as someone holds it.
type Set struct {
	cfg  SetConfig // defaults applied; immutable
	snap atomic.Pointer[Snapshot]

	mu         sync.Mutex
	byAddr     map[string]*member // guarded by mu
	order      []*member          // guarded by mu: the last Update's order
	started    bool               // guarded by mu: a non-empty Update was seen
	now        float64            // guarded by mu: the latest instant seen
	nextExpiry float64            // guarded by mu: earliest ejection deadline
	version    uint64             // guarded by mu: snapshots published
}

// member is the Set's private bookkeeping for one endpoint; guarded by Set.mu.
type member struct {
	st        *EndpointState
	ep        *Endpoint // current description; the same pointer st.ep holds
	unhealthy bool
	draining  bool
	ejected   bool
	until     float64 // end of the ejection when ejected
	ramp      bool    // slow start on the next return to service
	since     float64 // start of the current ramp; -Inf when none
}

// up reports whether m is in service, ignoring drain.
func (m *member) up() bool { return !m.unhealthy && !m.ejected }

// NewSet returns an empty set. It returns a *ConfigError when cfg is invalid.
func NewSet(cfg SetConfig) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SlowStartMin == 0 {
		cfg.SlowStartMin = DefaultSlowStartMin
	}
	if cfg.PanicThreshold == 0 {
		cfg.PanicThreshold = DefaultPanicThreshold
	}
	if cfg.LatencyDecay == 0 {
		cfg.LatencyDecay = DefaultLatencyDecay
	}
	cfg.Tables = append([]TableBuilder(nil), cfg.Tables...)
	s := &Set{
		cfg:        cfg,
		byAddr:     map[string]*member{},
		now:        math.Inf(-1),
		nextExpiry: math.Inf(1),
	}
	s.publishLocked(0)
	return s, nil
}

// Snapshot returns the current snapshot with one atomic load; never nil. It
// does not look at the time: use Current when slow start or ejection
// deadlines may have moved on since the last change.
func (s *Set) Snapshot() *Snapshot { return s.snap.Load() }

// Current returns the current snapshot, republished first when now has
// reached its Due instant (a slow-start step or the end of an ejection).
// The usual call costs one atomic load and one comparison. When a
// republication is due, the one caller that gets the Set's mutex without
// waiting rebuilds the snapshot (O(n)); callers that find the mutex taken
// return the snapshot they loaded. It never blocks.
func (s *Set) Current(now float64) *Snapshot {
	snap := s.snap.Load()
	if !(now >= snap.due) || !s.mu.TryLock() {
		return snap
	}
	defer s.mu.Unlock()
	if snap = s.snap.Load(); now >= snap.due {
		now = s.advanceLocked(now)
		s.expireLocked(now)
		s.publishLocked(now)
		snap = s.snap.Load()
	}
	return snap
}

// Pick is the request path in one call: the current snapshot at now, p's
// choice in it, and Start on the chosen endpoint. Call Done on the result
// exactly once when the request completes. It returns p's error
// (ErrNoEndpoints when nothing is eligible). p must return an index in
// range.
func (s *Set) Pick(now float64, p SetPicker) (*EndpointState, error) {
	snap := s.Current(now)
	i, err := p.Pick(snap, now)
	if err != nil {
		return nil, err
	}
	e := snap.eps[i]
	e.Start()
	return e, nil
}

// Update replaces the set's endpoints with eps, in that order (discovery
// sorts by address). Endpoints whose address stays keep their EndpointState
// (in-flight count, latency estimate), health, ejection, drain and ramp;
// their weight and Meta are taken from eps. Removed endpoints are
// forgotten: requests in flight to them finish on their old EndpointState,
// and an address that comes back later is a new endpoint. The first of
// duplicate addresses wins. The slice is not kept.
//
// An endpoint that joins after the first non-empty Update slow-starts
// (SetConfig.SlowStart) and starts with a latency estimate equal to the
// mean of the other endpoints' current estimates (none if none has one), so
// that it neither attracts a burst nor starves. A snapshot is published
// when anything changed.
func (s *Set) Update(now float64, eps []Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	changed := s.expireLocked(now)
	first := !s.started
	seed, seeded := 0.0, false
	next := make([]*member, 0, len(eps))
	byAddr := make(map[string]*member, len(eps))
	for i := range eps {
		e := eps[i]
		if byAddr[e.Addr] != nil {
			continue
		}
		m := s.byAddr[e.Addr]
		switch {
		case m == nil:
			if !first && !seeded {
				seed, seeded = s.meanLatencyLocked(now), true
			}
			m = s.newMemberLocked(now, e, first, seed)
			changed = true
		case m.ep.Weight != e.Weight || !maps.Equal(m.ep.Meta, e.Meta):
			ep := e
			m.ep = &ep
			m.st.ep.Store(&ep)
			changed = true
		}
		byAddr[e.Addr] = m
		next = append(next, m)
	}
	if len(next) != len(s.order) {
		changed = true
	} else {
		for i := range next {
			if next[i] != s.order[i] {
				changed = true
				break
			}
		}
	}
	s.byAddr, s.order = byAddr, next
	if len(next) > 0 {
		s.started = true
	}
	if changed {
		s.publishLocked(now)
	}
}

// newMemberLocked returns the bookkeeping for an endpoint joining at now.
func (s *Set) newMemberLocked(now float64, e Endpoint, first bool, seed float64) *member {
	ep := e
	st := &EndpointState{addr: e.Addr, tau: s.cfg.LatencyDecay}
	st.ep.Store(&ep)
	if seed > 0 {
		st.ewma.Store(packEWMA(seed, msOf(now)))
	}
	m := &member{st: st, ep: &ep, unhealthy: s.cfg.NewUnhealthy, since: math.Inf(-1)}
	if !first && s.cfg.SlowStart > 0 {
		if m.up() {
			m.since = now
		} else {
			m.ramp = true
		}
	}
	return m
}

// meanLatencyLocked returns the mean latency estimate at now over the
// endpoints that have one, or 0.
func (s *Set) meanLatencyLocked(now float64) float64 {
	sum, k := 0.0, 0
	for _, m := range s.order {
		if m.st.ewma.Load() != 0 {
			sum += m.st.Latency(now)
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}

// SetHealthy records an active health check's verdict on addr: ok = false
// makes it Unhealthy, ok = true healthy again (slow-starting if it had been
// in service before). It reports whether addr is in the set; unknown
// addresses are ignored (checks may race with discovery). A snapshot is
// published only when the state changed.
func (s *Set) SetHealthy(now float64, addr string, ok bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	changed := s.expireLocked(now)
	m := s.byAddr[addr]
	if m != nil && m.unhealthy == ok {
		wasUp := m.up()
		m.unhealthy = !ok
		s.transitionLocked(m, wasUp, now)
		changed = true
	}
	if changed {
		s.publishLocked(now)
	}
	return m != nil
}

// Eject takes addr out of service until the instant until (outlier
// detection); it returns to service by itself then — slow-starting, unless
// it is also unhealthy — at the first Current, Update or other change at or
// after until. Ejecting an ejected endpoint replaces its deadline. An until
// not after now changes nothing. It reports whether addr is in the set.
func (s *Set) Eject(now float64, addr string, until float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	changed := s.expireLocked(now)
	m := s.byAddr[addr]
	if m != nil && until > now {
		wasUp := m.up()
		m.ejected, m.until = true, until
		s.nextExpiry = min(s.nextExpiry, until)
		s.transitionLocked(m, wasUp, now)
		changed = true
	}
	if changed {
		s.publishLocked(now)
	}
	return m != nil
}

// Uneject ends addr's ejection before its deadline. It reports whether addr
// is in the set.
func (s *Set) Uneject(now float64, addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	changed := s.expireLocked(now)
	m := s.byAddr[addr]
	if m != nil && m.ejected {
		wasUp := m.up()
		m.ejected = false
		s.transitionLocked(m, wasUp, now)
		changed = true
	}
	if changed {
		s.publishLocked(now)
	}
	return m != nil
}

// Drain turns draining on or off for addr. A draining endpoint receives no
// new requests, whatever its health and even in panic mode; requests in
// flight to it continue and are counted as before (watch
// EndpointState.InFlight to know when it is idle). Ending a drain does not
// start a ramp: the endpoint never left service. Draining endpoints do not
// count in the panic threshold's share. It reports whether addr is in the
// set.
func (s *Set) Drain(now float64, addr string, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	changed := s.expireLocked(now)
	m := s.byAddr[addr]
	if m != nil && m.draining != on {
		m.draining = on
		changed = true
	}
	if changed {
		s.publishLocked(now)
	}
	return m != nil
}

// State returns addr's state at now and whether addr is in the set.
func (s *Set) State(now float64, addr string) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	if s.expireLocked(now) {
		s.publishLocked(now)
	}
	m := s.byAddr[addr]
	if m == nil {
		return Healthy, false
	}
	return s.stateLocked(m, now), true
}

// Len returns the number of endpoints in the set, whatever their state.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order)
}

// Config returns the configuration with defaults applied.
func (s *Set) Config() SetConfig {
	c := s.cfg
	c.Tables = append([]TableBuilder(nil), c.Tables...)
	return c
}

// advanceLocked returns now, or the latest instant seen if now is earlier
// (or NaN), and records it.
func (s *Set) advanceLocked(now float64) float64 {
	if !(now > s.now) {
		if math.IsInf(s.now, -1) {
			s.now = 0
		}
		return s.now
	}
	s.now = now
	return now
}

// expireLocked ends the ejections whose deadline is not after now, each
// returning to service at its deadline, and reports whether any ended.
func (s *Set) expireLocked(now float64) bool {
	if now < s.nextExpiry {
		return false
	}
	changed := false
	next := math.Inf(1)
	for _, m := range s.order {
		if !m.ejected {
			continue
		}
		if m.until <= now {
			wasUp := m.up()
			m.ejected = false
			s.transitionLocked(m, wasUp, m.until)
			changed = true
		} else {
			next = min(next, m.until)
		}
	}
	s.nextExpiry = next
	return changed
}

// transitionLocked applies the slow-start rules after m's health or
// ejection changed at instant at: leaving service arms a ramp for the
// return; returning with a ramp armed starts it.
func (s *Set) transitionLocked(m *member, wasUp bool, at float64) {
	switch isUp := m.up(); {
	case wasUp && !isUp:
		m.ramp = true
		m.since = math.Inf(-1)
	case !wasUp && isUp:
		if m.ramp && s.cfg.SlowStart > 0 {
			m.since = at
		}
		m.ramp = false
	}
}

// stateLocked returns m's state at now.
func (s *Set) stateLocked(m *member, now float64) State {
	switch {
	case m.draining:
		return Draining
	case m.unhealthy:
		return Unhealthy
	case m.ejected:
		return Ejected
	case now-m.since < s.cfg.SlowStart:
		return SlowStarting
	}
	return Healthy
}

// publishLocked builds the snapshot at now and stores it.
func (s *Set) publishLocked(now float64) {
	healthy, draining := 0, 0
	for _, m := range s.order {
		switch {
		case m.draining:
			draining++
		case m.up():
			healthy++
		}
	}
	size := len(s.order) - draining
	panicking := s.cfg.PanicThreshold > 0 && size > 0 &&
		float64(healthy) < s.cfg.PanicThreshold*float64(size)
	n := healthy
	if panicking {
		n = size
	}
	snap := &Snapshot{
		eps:       make([]*EndpointState, 0, n),
		state:     make([]State, 0, n),
		base:      make([]int, 0, n),
		weight:    make([]float64, 0, n),
		equal:     true,
		panicking: panicking,
		members:   len(s.order),
		draining:  draining,
		healthy:   healthy,
		at:        now,
		due:       math.Inf(1),
	}
	window := s.cfg.SlowStart
	for _, m := range s.order {
		if m.ejected {
			snap.due = min(snap.due, m.until)
		}
		if m.draining || (!m.up() && !panicking) {
			continue
		}
		st := s.stateLocked(m, now)
		base := m.ep.weight()
		w := float64(base)
		if st == SlowStarting {
			w *= max(s.cfg.SlowStartMin, (now-m.since)/window)
			snap.due = min(snap.due, m.since+window, now+window/RampSteps)
		}
		if len(snap.weight) > 0 && w != snap.weight[0] {
			snap.equal = false
		}
		snap.total += w
		snap.eps = append(snap.eps, m.st)
		snap.state = append(snap.state, st)
		snap.base = append(snap.base, base)
		snap.weight = append(snap.weight, w)
	}
	if !snap.equal {
		snap.prob, snap.alias = buildAlias(snap.weight, snap.total)
	}
	if prev := s.snap.Load(); prev != nil && sameMembers(prev, snap) {
		snap.tables = prev.tables
	} else {
		snap.tables = &tables{}
		for _, b := range s.cfg.Tables {
			snap.tables.build(snap, b)
		}
	}
	s.version++
	snap.version = s.version
	s.snap.Store(snap)
}

// sameMembers reports whether a and b list the same endpoints in the same
// order with the same base weights, so lookup tables built for one serve
// the other.
func sameMembers(a, b *Snapshot) bool {
	if len(a.eps) != len(b.eps) {
		return false
	}
	for i := range a.eps {
		if a.eps[i] != b.eps[i] || a.base[i] != b.base[i] {
			return false
		}
	}
	return true
}
