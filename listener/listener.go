package listener

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/overload"
)

// DefaultHeaderTimeout bounds reading a PROXY header when
// Config.HeaderTimeout is 0.
const DefaultHeaderTimeout = 10 * time.Second

// Engine serves one accepted connection in the caller's goroutine and
// returns when it is done (proxy.Server and l4.Proxy).
type Engine interface{ ServeConn(c net.Conn) }

// Config is what a Listener does with each connection.
type Config struct {
	// Name is the listener's name in logs.
	Name string
	// TLS, when not nil, is called for every connection (so a certificate
	// store can swap certificates) and the connection is served through
	// tls.Server with its answer; nil (or a nil answer): plaintext.
	TLS func() *tls.Config
	// ProxyFrom are the peers whose connections start with a PROXY
	// protocol header (v1 or v2); from any other peer none is read.
	ProxyFrom []netip.Prefix
	// ProxyRequired closes a connection from ProxyFrom without a header;
	// false serves it with the peer's address.
	ProxyRequired bool
	// HeaderTimeout bounds reading the PROXY header; 0 means
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// MaxPerIP is the most connections open at once from one client
	// address (after the PROXY header), set on the Gate by New and Swap
	// (overload.Gate.SetMaxPerIP); 0 means no bound.
	MaxPerIP int
	// Logger receives accept errors (Warn); nil means slog.Default().
	Logger *slog.Logger
}

// Listener accepts connections on one socket and hands each to its
// current engine. Make one with New; call Serve once. Safe for concurrent
// use.
type Listener struct {
	ln   net.Listener   // immutable
	gate *overload.Gate // immutable
	clk  clock.Clock    // immutable: the Gate's Guard's

	cur    atomic.Pointer[current]
	closed atomic.Bool
	done   chan struct{} // closed by Close

	mu      sync.Mutex
	pending map[net.Conn]struct{} // guarded by mu: connections reading a PROXY header

	accepted, refused, proxyRead, proxyRejected atomic.Uint64
}

// current is what Swap replaces: a Config and its engine.
type current struct {
	cfg    Config
	engine Engine
}

// New returns a Listener over ln admitting through g, serving with engine
// (not nil).
func New(ln net.Listener, g *overload.Gate, cfg Config, engine Engine) *Listener {
	l := &Listener{ln: ln, gate: g, clk: g.Guard().Clock(), done: make(chan struct{}),
		pending: map[net.Conn]struct{}{}}
	l.Swap(cfg, engine)
	return l
}

// Swap makes connections from now on use cfg and engine; the socket stays
// open. Connections already handed to the previous engine stay with it.
func (l *Listener) Swap(cfg Config, engine Engine) {
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l.gate.SetMaxPerIP(cfg.MaxPerIP)
	l.cur.Store(&current{cfg: cfg, engine: engine})
}

// Addr returns the socket's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting: it closes the socket (Serve returns nil) and the
// connections still reading a PROXY header. Connections handed to an
// engine are the engine's to end (its Shutdown). Safe to call more than
// once.
func (l *Listener) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(l.done)
	err := l.ln.Close()
	l.mu.Lock()
	for c := range l.pending {
		_ = c.Close()
	}
	l.mu.Unlock()
	return err
}

// Serve accepts connections until Close, then returns nil. An accept
// error pauses the loop (5 ms doubling to 1 s) and is logged; it never
// stops it.
func (l *Listener) Serve() error {
	var pause time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			cfg := &l.cur.Load().cfg
			cfg.Logger.Warn("listener: accept failed; retrying", "listener", cfg.Name, "err", err, "pause", pause)
			if !l.sleep(pause) {
				return nil
			}
			continue
		}
		pause = 0
		l.admit(c)
	}
}

// sleep pauses for d, or until Close; it reports whether d ran out.
func (l *Listener) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

// admit asks the Gate about c and starts its goroutine, or closes it.
func (l *Listener) admit(c net.Conn) {
	cur := l.cur.Load()
	tk, r := l.gate.Admit(l.clk.Now(), cur.cfg.TLS != nil)
	if r != overload.ReasonNone {
		l.refused.Add(1)
		reset(c)
		return
	}
	l.accepted.Add(1)
	go l.serveConn(c, &cur.cfg, tk)
}

// serveConn runs steps 3 to 6 of the package doc.
func (l *Listener) serveConn(c net.Conn, cfg *Config, tk overload.Ticket) {
	defer tk.Release()
	c, ok := l.proxyHeader(c, cfg)
	if !ok {
		l.proxyRejected.Add(1)
		reset(c)
		return
	}
	if !tk.SetIP(ipOf(c.RemoteAddr())) {
		reset(c)
		return
	}
	cur := l.cur.Load()
	if cur.cfg.TLS != nil {
		if tc := cur.cfg.TLS(); tc != nil {
			c = tls.Server(c, tc)
		}
	}
	cur.engine.ServeConn(c)
	_ = c.Close() // the engines close it; this makes sure before Release
}

// proxyHeader reads the PROXY header of a connection from ProxyFrom; ok
// false when the connection is to be closed.
func (l *Listener) proxyHeader(c net.Conn, cfg *Config) (_ net.Conn, ok bool) {
	if len(cfg.ProxyFrom) == 0 || !contains(cfg.ProxyFrom, ipOf(c.RemoteAddr())) {
		return c, true
	}
	if !l.hold(c) {
		return c, false
	}
	defer l.unhold(c)
	nc, read, err := readHeader(c, cfg.HeaderTimeout, cfg.ProxyRequired)
	if err != nil {
		return c, false
	}
	if read {
		l.proxyRead.Add(1)
	}
	return nc, true
}

// hold records c as reading its header, so Close closes it; false when
// the Listener is closed already.
func (l *Listener) hold(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	l.pending[c] = struct{}{}
	return true
}

func (l *Listener) unhold(c net.Conn) {
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
}

// Stats are a Listener's counters; the refusals by reason are the Gate's.
type Stats struct {
	Accepted      uint64 // admitted by the Gate
	Refused       uint64 // refused by the Gate at accept (SetIP refusals are not here)
	ProxyRead     uint64 // PROXY headers read (LOCAL ones included)
	ProxyRejected uint64 // closed for a malformed, partial or missing PROXY header
}

// Stats returns the counters; each is read atomically.
func (l *Listener) Stats() Stats {
	return Stats{Accepted: l.accepted.Load(), Refused: l.refused.Load(),
		ProxyRead: l.proxyRead.Load(), ProxyRejected: l.proxyRejected.Load()}
}

// reset closes c with SO_LINGER 0 when it is TCP: a reset, no TIME_WAIT.
func reset(c net.Conn) {
	nc := c
	if hc, ok := c.(*hdrConn); ok {
		nc = hc.Conn
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// ipOf returns a TCP address's IP, unmapped; the zero Addr otherwise.
func ipOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

func contains(list []netip.Prefix, a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
