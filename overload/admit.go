package overload

import (
	"math"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
)

// Reason says why a connection was refused.
type Reason uint8

const (
	// ReasonNone: admitted.
	ReasonNone Reason = iota
	// ReasonMaxConns: Config.MaxConns connections are open over every Gate.
	ReasonMaxConns
	// ReasonListenerMaxConns: the Gate's own connection limit is reached.
	ReasonListenerMaxConns
	// ReasonPerIP: the client's address has the Gate's per-IP limit of
	// connections open (Ticket.SetIP).
	ReasonPerIP
	// ReasonHandshakeRate: the TLS handshake bucket is empty.
	ReasonHandshakeRate
	// ReasonOverload: the Guard is in state Refuse.
	ReasonOverload
	numReasons
)

// NumReasons is the number of Reason values (ReasonNone included), the
// length of Stats.Refused.
const NumReasons = int(numReasons)

var reasonNames = [numReasons]string{"", "max-connections", "listener-max-connections", "per-ip", "handshake-rate", "overload"}

// String returns the reason's metric label ("max-connections",
// "listener-max-connections", "per-ip", "handshake-rate", "overload"), or
// "" for ReasonNone.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// ipShards is the number of independently locked parts of a Gate's per-IP
// counts.
const ipShards = 16

// Gate is one listener's admission: its connection count and limit, and
// the per-IP counts of its clients. Get one from Guard.Gate. Safe for
// concurrent use.
type Gate struct {
	g    *Guard // immutable
	name string // immutable

	maxConns atomic.Int64 // math.MaxInt64 or 0 before SetLimits: no bound
	maxPerIP atomic.Int64 // 0: no bound
	open     atomic.Int64
	admitted atomic.Uint64
	refused  [numReasons]atomic.Uint64

	ips [ipShards]ipShard
}

// ipShard counts the open connections of the addresses hashed to it.
type ipShard struct {
	mu   sync.Mutex
	n    map[netip.Addr]int64 // guarded by mu; an entry only while > 0
	peak int                  // guarded by mu: most entries since n was made
	_    [32]byte             // keeps neighbouring shards' mutexes off one cache line
}

// Name returns the name the Gate was made with.
func (gt *Gate) Name() string { return gt.name }

// Guard returns the Guard the Gate belongs to (its Clock gives Admit's
// instants).
func (gt *Gate) Guard() *Guard { return gt.g }

// SetLimits sets the most connections open at once on this Gate and from
// one client address; 0 or negative means no bound. New limits apply to
// connections admitted from now on: a lowered limit closes nothing.
func (gt *Gate) SetLimits(maxConns, maxPerIP int) {
	gt.maxConns.Store(int64(max(maxConns, 0)))
	gt.maxPerIP.Store(int64(max(maxPerIP, 0)))
}

// SetMaxPerIP sets only the per-IP limit (as SetLimits does); for a
// listener whose configuration carries it.
func (gt *Gate) SetMaxPerIP(maxPerIP int) { gt.maxPerIP.Store(int64(max(maxPerIP, 0))) }

// Admit decides an accepted connection at now (the Guard's clock); tls
// says whether it is about to start a TLS handshake. On a refusal (Reason
// not ReasonNone) the Ticket is the zero Ticket, the refusal is counted,
// and the caller closes the connection at once. An admitted connection's
// Ticket must be released when the connection closes. Admit takes no lock
// except the handshake bucket's (TLS connections only) and allocates only
// the admitted connection's Ticket.
func (gt *Gate) Admit(now float64, tls bool) (Ticket, Reason) {
	g := gt.g
	if State(g.state.Load()) == Refuse {
		return gt.refuse(ReasonOverload)
	}
	set := g.set.Load()
	if !acquire(&g.open, set.maxConns) {
		return gt.refuse(ReasonMaxConns)
	}
	lim := gt.maxConns.Load()
	if lim == 0 {
		lim = math.MaxInt64
	}
	if !acquire(&gt.open, lim) {
		g.open.Add(-1)
		return gt.refuse(ReasonListenerMaxConns)
	}
	if tls && set.hs != nil && !set.hs.Allow(now).Allowed {
		gt.open.Add(-1)
		g.open.Add(-1)
		return gt.refuse(ReasonHandshakeRate)
	}
	gt.admitted.Add(1)
	g.admitted.Add(1)
	return Ticket{&ticket{gate: gt}}, ReasonNone
}

// acquire adds one to n unless it is at lim already.
func acquire(n *atomic.Int64, lim int64) bool {
	for {
		v := n.Load()
		if v >= lim {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

func (gt *Gate) refuse(r Reason) (Ticket, Reason) {
	gt.refused[r].Add(1)
	gt.g.refused[r].Add(1)
	return Ticket{}, r
}

// Ticket is an admitted connection's hold on its counts. Copies share one
// hold. The zero Ticket (a refusal) holds nothing; its methods do nothing
// (SetIP reports false).
type Ticket struct{ t *ticket }

type ticket struct {
	gate *Gate // immutable

	mu       sync.Mutex
	released bool       // guarded by mu
	ipSet    bool       // guarded by mu: SetIP has run
	ipOK     bool       // guarded by mu: SetIP admitted ip
	ip       netip.Addr // guarded by mu; counted in its shard when ipOK
}

// SetIP applies the Gate's per-IP limit to the client address ip (its
// IPv4-mapped and zoned forms count as the plain address) and reports
// whether the connection may go on; on false (ReasonPerIP, counted) the
// caller closes the connection and releases the Ticket. Only the first call
// counts: later ones return its answer. An invalid ip is admitted and not
// counted. False after Release.
func (t Ticket) SetIP(ip netip.Addr) bool {
	if t.t == nil {
		return false
	}
	s := t.t
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.released:
		return false
	case s.ipSet:
		return s.ipOK
	}
	s.ipSet = true
	if !ip.IsValid() {
		s.ipOK = true
		return true
	}
	ip = ip.Unmap().WithZone("")
	if !s.gate.countIP(ip) {
		s.gate.refuse(ReasonPerIP)
		return false
	}
	s.ip, s.ipOK = ip, true
	return true
}

// Release gives the connection's counts back; call it when the connection
// has closed. Only the first call (of any copy) counts.
func (t Ticket) Release() {
	if t.t == nil {
		return
	}
	s := t.t
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return
	}
	s.released = true
	ip, counted := s.ip, s.ipOK && s.ip.IsValid()
	s.mu.Unlock()
	if counted {
		s.gate.uncountIP(ip)
	}
	s.gate.open.Add(-1)
	s.gate.g.open.Add(-1)
}

// shard returns the shard of ip: an FNV-1a hash of its 16 bytes.
func (gt *Gate) shard(ip netip.Addr) *ipShard {
	b := ip.As16()
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return &gt.ips[h%ipShards]
}

// countIP adds a connection of ip unless it has the per-IP limit open.
func (gt *Gate) countIP(ip netip.Addr) bool {
	sh := gt.shard(ip)
	lim := gt.maxPerIP.Load()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := sh.n[ip]
	if lim > 0 && n >= lim {
		return false
	}
	if sh.n == nil {
		sh.n = map[netip.Addr]int64{}
	}
	sh.n[ip] = n + 1
	sh.peak = max(sh.peak, len(sh.n))
	return true
}

// shrinkPeak is the size beyond which an emptied shard map is dropped: Go
// maps keep their peak's memory, so after a flood of many addresses an
// empty map would still hold it.
const shrinkPeak = 256

// uncountIP removes a connection of ip, and ip's entry at 0.
func (gt *Gate) uncountIP(ip netip.Addr) {
	sh := gt.shard(ip)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n := sh.n[ip]; n > 1 {
		sh.n[ip] = n - 1
		return
	}
	delete(sh.n, ip)
	if len(sh.n) == 0 && sh.peak > shrinkPeak {
		sh.n, sh.peak = nil, 0
	}
}

// GateStats are a Gate's counters for metrics.
type GateStats struct {
	// Open is the Gate's connections admitted and not yet released; IPs
	// the client addresses among them (entries of the per-IP map).
	Open int64
	IPs  int
	// MaxConns and MaxPerIP are the limits (0: none).
	MaxConns, MaxPerIP int
	// Admitted and Refused count as Stats' fields do, for this Gate.
	Admitted uint64
	Refused  [numReasons]uint64
}

// Stats returns the Gate's counters; each is read atomically, not all at
// one instant.
func (gt *Gate) Stats() GateStats {
	s := GateStats{Open: gt.open.Load(), MaxConns: int(gt.maxConns.Load()),
		MaxPerIP: int(gt.maxPerIP.Load()), Admitted: gt.admitted.Load()}
	for r := range s.Refused {
		s.Refused[r] = gt.refused[r].Load()
	}
	for i := range gt.ips {
		sh := &gt.ips[i]
		sh.mu.Lock()
		s.IPs += len(sh.n)
		sh.mu.Unlock()
	}
	return s
}
