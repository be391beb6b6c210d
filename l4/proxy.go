package l4

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
)

// Defaults of Config.
const (
	// DefaultConnectTimeout bounds one dial to an endpoint.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultIdleTimeout closes a connection on which no byte moved either
	// way for that long (Envoy's TCP proxy default).
	DefaultIdleTimeout = time.Hour
	// DefaultRetries is how many other endpoints a connection tries after
	// a failed dial.
	DefaultRetries = 2
	// MaxRetries bounds Config.Retries: balancer.Tried remembers
	// balancer.MaxTried endpoints.
	MaxRetries = balancer.MaxTried - 1
	// DefaultMaxConns bounds the connections proxied at once.
	DefaultMaxConns = 10000
)

// Config configures a Proxy. Only Set is required.
type Config struct {
	// Set holds the endpoints connections are balanced over; required.
	// Health checks, outlier detection, discovery and drains change it
	// while the proxy runs; each connection picks from its current
	// snapshot.
	Set *balancer.Set
	// Picker chooses among the snapshot's eligible endpoints; nil means
	// &balancer.LeastRequest{}, as for balancerhttp.Transport. A picker
	// with a Validate method is validated by New.
	Picker balancer.SetPicker
	// Clock gives the instants fed to Set.Current, the picker and
	// EndpointState.Done; nil means clock.NewReal(). Use the clock that
	// feeds the Set's health checks.
	Clock clock.Clock
	// ConnectTimeout bounds each dial; 0 means DefaultConnectTimeout; must
	// not be negative.
	ConnectTimeout time.Duration
	// IdleTimeout closes both connections when no byte has moved in
	// either direction for that long; 0 means DefaultIdleTimeout; negative
	// means never (a half-closed connection whose peer never finishes then
	// stays open until Shutdown).
	IdleTimeout time.Duration
	// Retries is how many other endpoints a connection tries when a dial
	// fails, each at most once; 0 means DefaultRetries, negative means
	// none; at most MaxRetries.
	Retries int
	// MaxConns bounds the connections proxied at once; a connection
	// accepted beyond it is closed at once (Stats.Refused). 0 means
	// DefaultMaxConns; negative means no bound.
	MaxConns int
	// ProxyProtocol, when 1 or 2, makes every upstream connection start
	// with a PROXY protocol header of that version (1: text, 2: binary)
	// carrying the client connection's RemoteAddr as the source and its
	// LocalAddr as the destination — after a PROXY header read by the
	// listener, the addresses that header gave — so the endpoint sees the
	// client's address rather than the proxy's. 0 sends none.
	ProxyProtocol int
	// Logger receives dial failures, connections closed for want of an
	// endpoint and accept errors, at Debug level except accept errors
	// (Warn); nil means none.
	Logger *slog.Logger
}

// ErrConfig: a Config value is out of range; the error says which.
var ErrConfig = errors.New("l4: invalid configuration")

// ErrClosed is returned by Serve called after Shutdown.
var ErrClosed = errors.New("l4: proxy is shut down")

// configError names a bad field; it wraps ErrConfig.
func configError(field, reason string) error {
	return &fieldError{field: field, reason: reason}
}

type fieldError struct{ field, reason string }

func (e *fieldError) Error() string { return "l4: Config." + e.field + ": " + e.reason }
func (e *fieldError) Unwrap() error { return ErrConfig }

// Stats counts a Proxy's connections and bytes since it was made.
type Stats struct {
	Accepted     uint64 // connections accepted (Refused included)
	Active       int64  // connections being proxied now
	Refused      uint64 // closed at once: MaxConns connections were open
	NoEndpoint   uint64 // closed at once: the Set had no eligible endpoint
	DialFailures uint64 // dials that failed (each attempt counts)
	Unreachable  uint64 // closed because every attempted dial failed
	IdleClosed   uint64 // closed by IdleTimeout
	HeaderFailed uint64 // closed: the PROXY header could not be written upstream
	BytesUp      uint64 // copied from clients to endpoints
	BytesDown    uint64 // copied from endpoints to clients
}

// Proxy balances TCP connections over a Set. Make one with New; Serve any
// number of listeners; Shutdown once. Safe for concurrent use.
type Proxy struct {
	set      *balancer.Set // immutable after New, as are the fields to log
	picker   balancer.SetPicker
	clk      clock.Clock
	dialer   net.Dialer
	idle     time.Duration
	retries  int
	maxConns int
	ppVer    byte // Config.ProxyProtocol; 0: none
	log      *slog.Logger
	epoch    time.Time // the idle clock's zero

	dialCtx    context.Context    // cancelled when Shutdown gives up waiting
	cancelDial context.CancelFunc // cancels dialCtx

	mu        sync.Mutex
	closing   bool                      // guarded by mu: Shutdown has begun
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*conn]struct{}        // guarded by mu; at most MaxConns
	wg        sync.WaitGroup            // connection goroutines; Add under mu while !closing

	accepted, refused, noEndpoint, dialFailures, unreachable, idleClosed atomic.Uint64
	headerFailed, bytesUp, bytesDown                                     atomic.Uint64
	active                                                               atomic.Int64
}

// New returns a Proxy, or an error wrapping ErrConfig (or the picker's
// validation error) naming the first bad field of cfg.
func New(cfg Config) (*Proxy, error) {
	if err := fill(&cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		set: cfg.Set, picker: cfg.Picker, clk: cfg.Clock,
		dialer:  net.Dialer{Timeout: cfg.ConnectTimeout},
		idle:    cfg.IdleTimeout,
		retries: cfg.Retries, maxConns: cfg.MaxConns, ppVer: byte(cfg.ProxyProtocol), log: cfg.Logger,
		epoch:   time.Now(),
		dialCtx: ctx, cancelDial: cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
	}, nil
}

// fill validates cfg and applies its defaults.
func fill(cfg *Config) error {
	switch {
	case cfg.Set == nil:
		return configError("Set", "must not be nil")
	case cfg.ConnectTimeout < 0:
		return configError("ConnectTimeout", "must not be negative (0 means "+DefaultConnectTimeout.String()+"), got "+cfg.ConnectTimeout.String())
	case cfg.Retries > MaxRetries:
		return configError("Retries", "must be at most "+strconv.Itoa(MaxRetries)+" (other endpoints tried after a failed dial), got "+strconv.Itoa(cfg.Retries))
	case cfg.ProxyProtocol < 0 || cfg.ProxyProtocol > 2:
		return configError("ProxyProtocol", "must be 0 (none), 1 or 2, got "+strconv.Itoa(cfg.ProxyProtocol))
	}
	if cfg.Picker == nil {
		cfg.Picker = &balancer.LeastRequest{}
	}
	if v, ok := cfg.Picker.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewReal()
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	switch {
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	case cfg.IdleTimeout < 0:
		cfg.IdleTimeout = 0 // never
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = DefaultRetries
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	switch {
	case cfg.MaxConns == 0:
		cfg.MaxConns = DefaultMaxConns
	case cfg.MaxConns < 0:
		cfg.MaxConns = int(^uint(0) >> 1)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Stats returns the counters; each is read atomically, not all at one
// instant.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted: p.accepted.Load(), Active: p.active.Load(), Refused: p.refused.Load(),
		NoEndpoint: p.noEndpoint.Load(), DialFailures: p.dialFailures.Load(),
		Unreachable: p.unreachable.Load(), IdleClosed: p.idleClosed.Load(),
		HeaderFailed: p.headerFailed.Load(), BytesUp: p.bytesUp.Load(), BytesDown: p.bytesDown.Load(),
	}
}

// Serve accepts connections on ln and proxies each in its own goroutines
// until ln is closed — by the caller or by Shutdown — and then returns nil.
// Temporary accept errors (too many open files) are logged and retried
// after a pause growing from 5 ms to 1 s; another accept error closes ln
// and is returned. Serve after Shutdown closes ln and returns ErrClosed.
func (p *Proxy) Serve(ln net.Listener) error {
	if !p.track(ln) {
		_ = ln.Close()
		return ErrClosed
	}
	defer p.untrack(ln)
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if t, ok := err.(interface{ Temporary() bool }); !ok || !t.Temporary() {
				_ = ln.Close()
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			p.log.Warn("l4: accept failed; retrying", "listener", ln.Addr().String(), "err", err, "pause", pause)
			if !p.wait(pause) {
				return nil
			}
			continue
		}
		pause = 0
		p.accept(c)
	}
}

// wait pauses for d, or until Shutdown stops the dials; it reports whether
// the pause ran its course.
func (p *Proxy) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.dialCtx.Done():
		return false
	}
}

// track records ln for Shutdown; false once Shutdown has begun.
func (p *Proxy) track(ln net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	p.listeners[ln] = struct{}{}
	return true
}

func (p *Proxy) untrack(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.listeners, ln)
}

// ServeConn proxies one accepted connection in the caller's goroutine and
// returns when both sides have finished; nc is closed then. When the proxy
// is shutting down or MaxConns connections are open (Stats.Refused), nc is
// closed at once. It is Serve's step, for callers that own the accept loop
// (the gateway's listener package); Shutdown waits for it as for Serve's
// connections.
func (p *Proxy) ServeConn(nc net.Conn) {
	if c := p.register(nc); c != nil {
		c.serve()
	}
}

// accept registers c and starts its goroutine.
func (p *Proxy) accept(nc net.Conn) {
	if c := p.register(nc); c != nil {
		go c.serve()
	}
}

// register counts nc and makes its conn, or closes nc and returns nil when
// the proxy is shutting down or full.
func (p *Proxy) register(nc net.Conn) *conn {
	p.accepted.Add(1)
	c := &conn{p: p, client: nc}
	p.mu.Lock()
	if p.closing || len(p.conns) >= p.maxConns {
		full := !p.closing
		p.mu.Unlock()
		if full {
			p.refused.Add(1)
		}
		_ = nc.Close()
		return nil
	}
	p.conns[c] = struct{}{}
	p.active.Add(1)
	p.wg.Add(1)
	p.mu.Unlock()
	return c
}

// done unregisters c once its goroutines have ended.
func (p *Proxy) done(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.active.Add(-1)
	p.wg.Done()
}

// Shutdown stops the proxy: it closes every listener (Serve returns nil),
// waits until the open connections have ended or ctx is done, and in the
// latter case closes them, aborts dials in progress and returns ctx.Err()
// once their goroutines have returned. A later Serve returns ErrClosed.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	for ln := range p.listeners {
		_ = ln.Close()
	}
	p.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		p.cancelDial()
		return nil
	case <-ctx.Done():
	}
	p.cancelDial()
	p.mu.Lock()
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	<-ended
	return ctx.Err()
}
