package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/certstore"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/l4"
	"github.com/spillwayhq/spillway/listener"
	"github.com/spillwayhq/spillway/proxy"
)

// sock is one listening socket. It outlives reloads while its identity
// (socketID) stays; its engine is kept while the settings it was built
// from stay (engineKey), else replaced, the old engine draining.
type sock struct {
	id    string
	cfg   *config.Listener // the current generation's
	ekey  string
	ln    net.Listener
	lst   *listener.Listener
	http  *proxy.Server // protocol http
	tcp   *l4.Proxy     // protocol tcp
	certs *certstore.Store
	done  chan struct{} // closed when Serve has returned
}

// handoff is how long a replaced engine still takes the connections
// accepted before the swap (HeaderTimeout bounds a PROXY header's read).
const handoff = 2 * time.Second

// socketID is a listener's identity across reloads: its protocol and
// address, or its name for a port-0 address (any free port: two port-0
// listeners share no socket).
func socketID(l *config.Listener) string {
	if strings.HasSuffix(l.Address, ":0") {
		return l.Protocol + " name " + l.Name
	}
	return l.Protocol + " " + l.Address
}

// engineKey fingerprints what a listener's engine is built from: a change
// of routes or certificates keeps the engine, any other change builds a
// new one for the same socket. A tcp listener's engine is bound to its
// cluster's Set: a rebuilt cluster means a new engine.
func (g *Gateway) engineKey(l *config.Listener, gen *generation) string {
	if l.Protocol == "tcp" {
		return fmt.Sprintf("%s %p", listenerKey(l), gen.clusters[l.Cluster])
	}
	return listenerKey(l)
}

func listenerKey(l *config.Listener) string {
	c := *l
	c.Routes = nil
	if l.TLS != nil {
		t := *l.TLS
		t.Certificates = nil // swapped into the kept engine's certstore
		c.TLS = &t
	}
	return fingerprint(c)
}

// openSockets opens the sockets cfg has that are not open yet (all or
// none: on a failure the ones opened are closed again).
func (g *Gateway) openSockets(cfg *config.Config) (map[string]net.Listener, error) {
	opened := map[string]net.Listener{}
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		id := socketID(l)
		if _, ok := g.socks[id]; ok {
			continue
		}
		ln, err := net.Listen("tcp", l.Address)
		if err != nil {
			closeAll(opened)
			return nil, cfg.Errorf(&l.Address, "listener %q: %v", l.Name, err)
		}
		opened[id] = ln
	}
	return opened, nil
}

func closeAll(m map[string]net.Listener) {
	for _, ln := range m {
		_ = ln.Close()
	}
}

// applySockets points every socket of gen's configuration at gen: kept
// sockets get the new routes (same engine) or a new engine; new sockets
// start serving; sockets gen does not have close, their engines draining
// in the background. The caller holds g.mu.
func (g *Gateway) applySockets(gen *generation, opened map[string]net.Listener) {
	keep := map[string]bool{}
	for i := range gen.cfg.Listeners {
		l := &gen.cfg.Listeners[i]
		id := socketID(l)
		keep[id] = true
		s := g.socks[id]
		if s == nil {
			s = &sock{id: id, ln: opened[id], done: make(chan struct{})}
			g.socks[id] = s
			s.cfg = l
			s.ekey = g.engineKey(l, gen)
			g.newEngine(s, gen, nil)
			g.serve(s)
			continue
		}
		old := s.cfg
		s.cfg = l
		if k := g.engineKey(l, gen); k != s.ekey {
			s.ekey = k
			g.newEngine(s, gen, old)
			continue
		}
		g.refresh(s, gen)
	}
	names := map[string]bool{}
	for i := range gen.cfg.Listeners {
		names[gen.cfg.Listeners[i].Name] = true
	}
	for id, s := range g.socks {
		if !keep[id] {
			delete(g.socks, id)
			s.closeSocket()
			if !names[s.cfg.Name] {
				g.guard.RemoveGate(s.cfg.Name) // its tickets still release into it
			}
			g.background(gen.cfg.Drain.Timeout.D(), func(ctx context.Context) { _ = s.shutdown(ctx) })
		}
	}
}

// refresh gives a kept engine gen's routes and the listener's current
// certificates (a kept tcp engine's cluster is the same object).
func (g *Gateway) refresh(s *sock, gen *generation) {
	if s.certs != nil {
		if err := s.certs.Swap(certPairs(s.cfg)); err != nil {
			g.log.Error("gateway: certificates not replaced", "listener", s.cfg.Name, "err", err)
		}
	}
	if s.http != nil {
		s.http.SetRouter(gen.routers[s.cfg.Name])
	}
}

// newEngine builds the socket's engine for gen and hands the socket to it;
// the engine it replaces (prevCfg's) drains in the background.
func (g *Gateway) newEngine(s *sock, gen *generation, prevCfg *config.Listener) {
	oldHTTP, oldTCP := s.http, s.tcp
	s.http, s.tcp = nil, nil
	l := s.cfg
	if l.TLS != nil {
		st, err := certstore.New(certPairs(l), l.ServerTLS(), g.log)
		if err != nil {
			// Load checked every pair: only a file changed since can fail.
			g.log.Error("gateway: certificates", "listener", l.Name, "err", err)
		} else {
			s.certs = st
		}
	} else {
		s.certs = nil
	}
	var engine listener.Engine
	if l.Protocol == "tcp" {
		s.tcp = g.newTCP(l, gen)
		engine = s.tcp
	} else {
		s.http = g.newHTTP(l, gen)
		engine = s.http
	}
	gate := g.guard.Gate(l.Name)
	gate.SetLimits(l.Limits.MaxConnections, l.Limits.MaxPerIP)
	lcfg := g.listenerConfig(s)
	if s.lst == nil {
		s.lst = listener.New(s.ln, gate, lcfg, engine)
	} else {
		s.lst.Swap(lcfg, engine)
	}
	if prevCfg != nil {
		if oldHTTP != nil {
			oldHTTP.Drain()
		}
		g.background(gen.cfg.Drain.Timeout.D(), func(ctx context.Context) {
			// A connection accepted just before the Swap may still be on
			// its way to the old engine (reading its PROXY header, say):
			// the old engine keeps taking connections for a moment.
			t := time.NewTimer(handoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			switch {
			case oldHTTP != nil:
				_ = oldHTTP.Shutdown(ctx)
			case oldTCP != nil:
				_ = oldTCP.Shutdown(ctx)
			}
		})
	}
}

func (g *Gateway) listenerConfig(s *sock) listener.Config {
	l := s.cfg
	out := listener.Config{
		Name: l.Name, HeaderTimeout: l.Limits.HeaderTimeout.D(), MaxPerIP: l.Limits.MaxPerIP,
		ProxyFrom: l.ProxyPrefixes(),
	}
	if l.ProxyProtocol != nil {
		out.ProxyRequired = l.ProxyProtocol.Required
	}
	if s.certs != nil {
		out.TLS = s.certs.TLSConfig // one config, which reads the current certificates
	}
	return out
}

func (g *Gateway) newHTTP(l *config.Listener, gen *generation) *proxy.Server {
	lim := l.Limits
	srv := proxy.NewServer(proxy.Config{
		HeaderTimeout: lim.HeaderTimeout.D(), IdleTimeout: lim.IdleTimeout.D(),
		BodyTimeout: lim.BodyInactivity.D(), SendTimeout: lim.BodyInactivity.D(),
		Limits:         httpwire.Limits{MaxHeaderBytes: int(lim.MaxHeaderBytes), MaxFields: lim.MaxHeaderCount},
		TrustedProxies: l.TrustedPrefixes(), HTTP2: l.HTTP2, H2Engine: l.HTTP2Engine, // limits.max_connections: the listener's gate
		MaxConnAge: lim.MaxAge.D(), MaxConnAgeJitter: lim.MaxAgeJitter, AgeGrace: gen.cfg.Drain.Timeout.D(),
		Clock: g.clk, Logger: g.log, AccessLog: g.opts.AccessLog, OmitReason: !l.ReasonHeader,
	}, gen.routers[l.Name])
	if g.drain.Load() {
		srv.Drain()
	}
	if !g.keepOn.Load() {
		srv.SetKeepAlive(false)
	}
	return srv
}

func (g *Gateway) newTCP(l *config.Listener, gen *generation) *l4.Proxy {
	cl := gen.clusters[l.Cluster]
	p, err := l4.New(l4.Config{
		Set: cl.px.Set, Picker: cl.px.Picker, Clock: g.clk, Logger: g.log,
		// limits.max_connections is the listener's gate's (it holds across
		// the engines of a reload); idle: l4's own 1 h.
		MaxConns: -1, ProxyProtocol: cl.proxyProto,
	})
	if err != nil {
		panic(fmt.Sprintf("gateway: l4 config from a valid file: %v", err)) // config validated it
	}
	return p
}

// serve runs the socket's accept loop.
func (g *Gateway) serve(s *sock) {
	g.log.Info("gateway: listening", "listener", s.cfg.Name, "address", s.ln.Addr().String(),
		"protocol", s.cfg.Protocol, "tls", s.cfg.TLS != nil)
	go func() {
		defer close(s.done)
		if err := s.lst.Serve(); err != nil && !errors.Is(err, net.ErrClosed) {
			g.log.Error("gateway: listener stopped", "listener", s.cfg.Name, "err", err)
		}
	}()
}

func (s *sock) addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// closeSocket stops accepting.
func (s *sock) closeSocket() {
	if s.lst != nil {
		s.lst.Close()
	}
}

// shutdown lets the socket's engine finish its connections until ctx ends.
func (s *sock) shutdown(ctx context.Context) error {
	<-s.done
	switch {
	case s.http != nil:
		return s.http.Shutdown(ctx)
	case s.tcp != nil:
		return s.tcp.Shutdown(ctx)
	}
	return nil
}

// background runs fn on the gateway's wait group with a context that
// ends after grace, or when Shutdown has closed the current engines.
func (g *Gateway) background(grace time.Duration, fn func(ctx context.Context)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		ctx, cancel := context.WithTimeout(g.ctx, grace)
		defer cancel()
		fn(ctx)
	}()
}

// certPairs lists a TLS listener's certificates for its certstore.
func certPairs(l *config.Listener) []certstore.Pair {
	files := l.CertificateFiles()
	out := make([]certstore.Pair, len(l.TLS.Certificates))
	for i, c := range l.TLS.Certificates {
		out[i] = certstore.Pair{CertPEM: []byte(c.Cert), KeyPEM: []byte(c.Key)}
		if i < len(files) {
			out[i].CertFile, out[i].KeyFile = files[i].Cert, files[i].Key
		}
	}
	return out
}
