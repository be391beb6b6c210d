package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/internal/conndeadline"
	"github.com/spillwayhq/spillway/internal/sendwait"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// h1conn is one client connection served by the HTTP/1.1 engine. Every
// buffer it needs is pooled, so a kept-alive request allocates nothing
// for parsing, routing or building the upstream head: the small ones stay
// with the h1conn (pooled across connections), the read and write
// buffers (bufs) are held only while a request is served (idle.go).
type h1conn struct {
	s       *Server
	c       net.Conn
	sc      stashConn         // c, with the byte the idle wait or the disconnect watcher read
	dl      conndeadline.Conn // c's deadlines, set through it (it forgets them after the disconnect watcher's own)
	bufs    *connBufs         // nil while idle
	br      *bufio.Reader
	bw      *bufio.Writer
	one     [1]byte // the idle wait's read
	secure  bool
	peer    netip.AddrPort
	trusted bool

	// An answer's last bytes may be left in bw (deferred) for
	// awaitRequest to write and wait for the next request in one system
	// call less (send, through sw, bw's writer; internal/sendwait); an
	// eager connection flushes every answer at once (send.go).
	send      sendwait.Sender
	sw        sockWriter
	deferred  bool
	awaitNext bool
	eager     bool

	head  httpwire.RequestHead
	view  request.View
	hdr   fieldHeader
	out   outbound
	host  []byte // lowercased Host without port, for the View
	wbuf  []byte // the upstream request head, then the client response head
	ureq  upstream.Request
	uresp upstream.Response
	resp  *upstream.Response // the answer being forwarded: &uresp, or a winning hedge's
	hedge *hedging           // made on the first hedged request (hedge.go)
	body  reqBody
	// replay keeps the body for a retry (replay.go); replayR reads it.
	// The engine is synchronous: no attempt outlives the next one.
	replay  replay
	replayR replayReader
	cw      httpwire.ChunkedWriter // re-chunks response bodies
	watch   watcher
	state   atomic.Int32 // connActive, connIdle, connClosing

	// Max age (age.go): the deadline (0: none), set before the sweeper
	// sees the connection; aged, set by the sweeper past it; tunneling,
	// while an upgraded connection may be cut for its age.
	ageAt     int64
	aged      atomic.Bool
	tunneling atomic.Bool

	method [24]byte // a copy of the method, valid while the body is read
	ibuf   []byte   // 1xx heads
	isHead bool     // the request's method is HEAD
	sent   bool     // copyResponse wrote and flushed the whole answer

	rec  record      // the request's bookkeeping (record.go)
	pass *chain.Pass // the request's way through the route's policy chain (pooled; nil without)

	// Method values made once per connection (a method value allocates).
	xctx       *exchangeCtx // see exchange
	interimFn  func(*httpwire.ResponseHead)
	trailersFn func() []httpwire.Field
}

var h1Pool = sync.Pool{New: func() any { return new(h1conn) }}

func newH1Conn(s *Server, c net.Conn, secure bool, ageAt int64) *h1conn {
	hc := h1Pool.Get().(*h1conn)
	hc.s, hc.c, hc.secure, hc.ageAt = s, c, secure, ageAt
	hc.state.Store(connActive)
	hc.aged.Store(false)
	hc.watch.gone, hc.watch.timedOut = false, false // a pooled h1conn's last client may have left
	hc.tunneling.Store(false)
	hc.sc = stashConn{Conn: c}
	hc.dl.Reset()
	hc.send.Init(c)
	hc.sw.c = hc
	hc.deferred, hc.awaitNext, hc.eager = false, false, false
	hc.peer = peerOf(c)
	hc.trusted = trusted(s.cfg.TrustedProxies, hc.peer.Addr())
	hc.hdr.h = &hc.head
	hc.out.hop = hc.head.HopByHop
	hc.watch.c = hc
	if hc.interimFn == nil {
		hc.interimFn = hc.interim
		hc.trailersFn = hc.body.trailers
		hc.watch.done = make(chan struct{}, 1)
	}
	return hc
}

// release returns the connection's buffers to the pools.
func (c *h1conn) release() {
	c.dropBufs()
	c.forgetRequest()
	c.s, c.c, c.sc.Conn = nil, nil, nil
	c.uresp.Close()
	c.closeHedges()
	c.resp = nil
	h1Pool.Put(c)
}

// exchange returns the context for the next upstream exchange: the
// connection's reusable one, or a new one when the last was cancelled.
func (c *h1conn) exchange() *exchangeCtx {
	if c.xctx == nil || c.xctx.Err() != nil {
		c.xctx = newExchangeCtx()
	}
	return c.xctx
}

// sniffPreface reports whether the client opened with the HTTP/2 preface
// (h2c with prior knowledge); the returned conn replays what was read (a
// copy: the read buffer goes back to the pool). Its first byte has
// arrived (awaitRequest); the rest of the preface is bounded by the idle
// deadline armed for it.
func (c *h1conn) sniffPreface() (*prefaceConn, bool) {
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	b, err := c.br.Peek(3)
	if err != nil || string(b) != "PRI" {
		return nil, false
	}
	b, err = c.br.Peek(len(preface))
	if err != nil || string(b) != preface {
		return nil, false
	}
	c.dl.SetRead(c.c, time.Time{})
	b, _ = c.br.Peek(c.br.Buffered())
	return &prefaceConn{Conn: c.c, pending: bytes.Clone(b)}, true
}

// serve runs requests on the connection until one of them ends it.
func (c *h1conn) serve() {
	for c.serveOne() {
	}
	if c.bw != nil {
		_ = c.bw.Flush()
	}
}

// readHead waits for a request head: up to IdleTimeout for its first byte,
// then HeaderTimeout for the rest. It returns the head's length in the
// reader's buffer (parsed into c.head), io.EOF-like errors for a client
// that went away quietly, or an error to answer.
func (c *h1conn) readHead() (int, error) {
	cfg := &c.s.cfg
	if !c.awaitRequest() {
		return 0, errQuiet
	}
	// Parse again only when new bytes hold an LF (a head ends with one):
	// a client trickling a head byte by byte costs linear time, not
	// quadratic. The header deadline is armed only when the first read
	// did not bring the whole head (the usual case costs no deadline).
	seen := 0
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if seen == 0 || bytes.IndexByte(buf[seen:], '\n') >= 0 {
			n, err := httpwire.ParseRequestHead(buf, &c.head, cfg.Limits)
			if err != httpwire.ErrIncomplete {
				return n, err
			}
		}
		if seen == 0 {
			c.dl.ArmRead(c.c, time.Now(), cfg.HeaderTimeout)
		}
		seen = len(buf)
		if seen >= cfg.Limits.MaxHeaderBytes {
			return 0, errHeadTooLarge
		}
		if _, err := c.br.Peek(seen + 1); err != nil {
			if isTimeout(err) {
				return 0, errHeadTimeout
			}
			return 0, errQuiet
		}
	}
}

var (
	errQuiet        = errors.New("proxy: client went away")
	errHeadTimeout  = errors.New("proxy: head timeout")
	errHeadTooLarge = &httpwire.Error{Status: 431, Reason: "header section too large"} // httpwire's words, however the head arrived
)

// serveOne reads, routes and forwards one request; false ends the
// connection.
func (c *h1conn) serveOne() bool {
	n, err := c.readHead()
	if err != nil {
		c.refuseHead(err)
		return false
	}
	// The head stays where it is in the buffer, and its fields valid, until
	// the body is read: discarding it only moves the read position.
	c.br.Discard(n)
	c.isHead = string(c.head.Method) == "HEAD"
	c.fillView()
	hasBody := c.head.Chunked || c.head.ContentLength > 0
	// A refusal before the body is read closes the connection when there
	// is a body: draining an unbounded body for keep-alive is not worth it.
	keep := c.head.KeepAlive && !hasBody
	if dotSegment(c.head.Path) {
		return c.writeProblem(problemDotSegments, keep)
	}
	if string(c.head.Method) == "CONNECT" {
		c.writeProblem(problemConnect, false)
		return false
	}
	rt, ok := c.s.route().Route(&c.view)
	if !ok {
		return c.writeProblem(problemNoRoute, keep)
	}
	c.rec.begin(rt, &c.s.cfg)
	if c.rec.log { // copies: the head's bytes are reused once its body is read
		c.rec.method, c.rec.host, c.rec.path = string(c.head.Method), string(c.host), string(c.head.Path)
	}
	keep = c.routed(rt, keep)
	if c.watch.gone {
		c.rec.clientGone()
	}
	c.rec.end(c.s, c.peer.Addr())
	return keep
}

// routed serves a request that took route rt: the refusals that depend
// on the route, then the exchange with its cluster.
func (c *h1conn) routed(rt *Route, keep bool) bool {
	if rt.MaxBodyBytes > 0 && c.head.ContentLength > rt.MaxBodyBytes {
		c.writeProblem(problemBodyTooLarge, false)
		return false
	}
	upgrade, ok := c.upgradeFor(rt)
	if !ok {
		return c.writeProblem(problemUpgrade, keep)
	}
	m := copy(c.method[:], c.head.Method)
	c.fillOutbound(m, upgrade)
	c.out.pass = nil
	if rt.Policy != nil {
		c.pass = passes.Get().(*chain.Pass)
		defer c.dropPass()
		ref := rt.Policy.Admit(context.Background(), c.s.cfg.Clock, c.rec.start, &c.view, c.pass)
		c.rec.admitted(c.pass)
		if ref != nil {
			return c.refuse(ref, keep)
		}
		c.out.pass, c.out.now = c.pass, c.s.cfg.Clock.Now()
		c.rec.tryAt = c.out.now
	}
	c.wbuf = appendHead(c.wbuf[:0], &c.out, rt)
	if c.rec.log {
		c.rec.reqID = string(c.wbuf[c.out.idAt:c.out.idEnd])
	}
	keep = c.forward(rt, m)
	if c.out.pass != nil {
		c.pass.End(c.s.cfg.Clock.Now(), outcomeOf(&c.rec, c.watch.gone))
		c.out.pass = nil
	}
	return keep
}

// upgradeFor returns the Upgrade to forward (nil: none), or false when the
// route does not allow the one asked for.
func (c *h1conn) upgradeFor(rt *Route) ([]byte, bool) {
	switch {
	case c.head.Upgrade == nil:
		return nil, true
	case httpwire.EqualFold(c.head.Upgrade, "h2c"):
		// The deprecated h2c upgrade (RFC 9113 retires it) is ignored, as
		// a server may ignore any Upgrade: the request goes on in HTTP/1.1
		// (curl --http2 on http:// then still works). Switching would make
		// the connection a tunnel to one backend, past routing.
		return nil, true
	case !allowedUpgrade(rt.Upgrades, c.head.Upgrade):
		return nil, false
	}
	return c.head.Upgrade, true
}

// refuseHead answers a head that could not be read.
func (c *h1conn) refuseHead(err error) {
	var we *httpwire.Error
	switch {
	case errors.As(err, &we):
		c.writeProblem(protocolProblem(we), false)
	case err == errHeadTimeout:
		c.writeProblem(problemHeaderTimeout, false)
	}
}

// writeProblem writes a pre-built refusal and flushes it. It reports
// whether the connection stays open: keep, unless a drain, keep-alive off
// or the connection's age ends it ("Connection: close" then).
func (c *h1conn) writeProblem(p *Problem, keep bool) bool {
	keep = keep && c.mayKeep()
	c.rec.gateway(p, c.isHead)
	c.wbuf = p.appendH1(c.wbuf[:0], keep, c.isHead, !c.s.cfg.OmitReason)
	c.armSend()
	_, _ = c.bw.Write(c.wbuf)
	return c.finish(keep) == nil && keep
}

// fillView points the View at the parsed head (no copies but the Host,
// which is lowercased and stripped of its port).
func (c *h1conn) fillView() {
	h := &c.head
	c.host = normalHost(c.host[:0], h.Host)
	c.view = request.View{
		Method: bstr(h.Method), Host: bstr(c.host), Path: bstr(h.Path), Query: bstr(h.Query),
		Major: 1, Minor: h.Minor, Secure: c.secure, Client: c.peer, Header: &c.hdr,
		Trusted: c.trusted, Proxies: c.s.cfg.TrustedProxies,
	}
}

// fillOutbound describes the request for appendHead.
func (c *h1conn) fillOutbound(m int, upgrade []byte) {
	h := &c.head
	o := &c.out
	o.method, o.path, o.query, o.host = c.method[:m], h.Path, h.Query, h.Host
	if len(h.Query) == 0 && !hasQuery(h.Target) {
		o.query = nil
	}
	o.fields, o.peer, o.secure, o.trusted, o.upgrade = h.Fields, c.peer, c.secure, c.trusted, upgrade
	switch {
	case h.Chunked:
		o.length = bodyChunked
	case h.ContentLength >= 0:
		o.length = h.ContentLength
	default:
		o.length = bodyNone
	}
}

func hasQuery(target []byte) bool {
	for _, b := range target {
		if b == '?' {
			return true
		}
	}
	return false
}

// armSend bounds the next writes to the client by SendTimeout of
// inactivity, lazily (conndeadline: a keep-alive connection renews it
// every MaxSlack, not on every write).
func (c *h1conn) armSend() { c.dl.ArmWrite(c.c, time.Now(), c.s.cfg.SendTimeout) }

// armBody bounds the next reads of the request body by BodyTimeout of
// inactivity, lazily like armSend.
func (c *h1conn) armBody() { c.dl.ArmRead(c.c, time.Now(), c.s.cfg.BodyTimeout) }

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
