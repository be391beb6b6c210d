package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/h2wire"
	"github.com/spillwayhq/spillway/httpserver"
)

// The HTTP/2 engines (Config.H2Engine).
const (
	// H2Wire serves HTTP/2 with the h2wire package: one reading goroutine
	// per connection, pooled workers for the streams, no goroutine or
	// channel between a stream and the connection on a request's way.
	H2Wire = "wire"
	// H2Std serves HTTP/2 with x/net/http2's server.
	H2Std = "std"
)

// serveWire serves one HTTP/2 connection (h2 after ALPN, or h2c with
// prior knowledge, preRead then holding the bytes already read) with the
// h2wire engine. Each stream is handed to the same per-stream handler as
// x/net's engine (h2handler, behind httpserver.Handler's deadlines) as an
// *http.Request and an http.ResponseWriter built over the h2wire.Stream
// (wireExchange), so both engines run one forwarding path.
func (s *Server) serveWire(c net.Conn, preRead []byte, secure bool, ageAt int64) {
	hc := &h2conn{c: c}
	h := &wireHandler{h2handler: h2handler{s: s, conn: hc, secure: secure, peer: peerOf(c)}, remote: c.RemoteAddr().String()}
	h.trusted = trusted(s.cfg.TrustedProxies, h.peer.Addr())
	h.next = httpserver.Handler(&h.h2handler, s.cfg.BodyTimeout, s.cfg.SendTimeout)
	hc.wire = h2wire.NewConn(c, preRead, &s.wireCfg, h)
	s.trackH2(hc)
	defer s.untrackH2(hc)
	hc.armAge(ageAt, s.cfg.AgeGrace)
	defer hc.stopAge()
	_ = hc.wire.Serve()
}

// wireConfig is the h2wire configuration of cfg's connections. The
// connection-wide timeouts are the Server's (HeaderTimeout bounds the
// preface and the SETTINGS exchange, as it bounds an HTTP/1.1 head); the
// per-stream waits are set
// twice as long as BodyTimeout and SendTimeout, which httpserver.Handler
// re-arms as stream deadlines on every read and write, so that the
// handler's deadline, not the connection's bound, ends a silent stream.
func wireConfig(cfg *Config) h2wire.Config {
	return h2wire.Config{
		MaxFrameSize:      1 << 20,
		MaxHeaderListSize: uint32(min(max(cfg.Limits.MaxHeaderBytes, 1<<10), 1<<20)),
		IdleTimeout:       positive(cfg.IdleTimeout),
		SettingsTimeout:   positive(cfg.HeaderTimeout),
		WriteTimeout:      positive(cfg.SendTimeout),
		ReadTimeout:       2 * positive(cfg.BodyTimeout),
		Clock:             cfg.Clock,
	}
}

// wireHandler is the h2wire engine's Handler for one connection.
type wireHandler struct {
	h2handler
	next   http.Handler // h2handler behind httpserver.Handler
	remote string       // the client's address, for Request.RemoteAddr
}

// ServeStream serves one stream: it builds the request and the writer,
// runs the handler and ends the response the way x/net does. A panic
// resets the stream with INTERNAL_ERROR (http.ErrAbortHandler, which
// forwardStd raises for a body cut short, silently; any other is logged
// with its stack, as net/http logs it).
func (h *wireHandler) ServeStream(st *h2wire.Stream) {
	x := wireExchanges.Get().(*wireExchange)
	defer x.close()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				h.s.cfg.Logger.Error("proxy: panic serving an HTTP/2 stream", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			x.cancel()
			st.Reset(http2.ErrCodeInternal)
		}
	}()
	r, ok := x.open(h, st)
	if !ok {
		st.Reset(http2.ErrCodeProtocol)
		return
	}
	h.next.ServeHTTP(&x.w, r)
	x.w.finish()
}

// wireExchange is one stream's request and response state, pooled.
type wireExchange struct {
	st     *h2wire.Stream
	req    http.Request // the template; the handler gets a copy with ctx
	url    url.URL
	hdr    http.Header // the request header, reused
	trl    http.Header // the request trailers, reused
	vals   []string    // backing of hdr's value slices
	text   []byte      // the request's strings, before they become one
	spans  []int       // where each field's name and value end in text
	body   wireBody
	w      wireWriter
	ctx    context.Context
	cancel context.CancelFunc
	expect bool // the client waits for 100 Continue before its body
}

var wireExchanges = sync.Pool{New: func() any {
	x := &wireExchange{hdr: make(http.Header), trl: make(http.Header)}
	x.body.x, x.w.x = x, x
	x.w.hdr = make(http.Header)
	return x
}}

// close forgets the stream and pools x.
func (x *wireExchange) close() {
	x.cancel()
	x.st.AfterDone(nil)
	clear(x.hdr)
	clear(x.trl)
	clear(x.vals)
	x.w.reset()
	x.req, x.url = http.Request{}, url.URL{}
	x.st, x.ctx, x.cancel = nil, nil, nil
	x.vals, x.text, x.spans = x.vals[:0], x.text[:0], x.spans[:0]
	x.body.eof, x.expect = false, false
	wireExchanges.Put(x)
}

// open builds the request of st as x/net's server would: the fields in a
// canonical-keyed Header without Host (the authority is Request.Host),
// Expect: 100-continue and Trailer taken out (the first answered when the
// body is first read, the second declaring Request.Trailer's keys),
// ContentLength -1 for a body of unknown length and 0 for none. Its
// context ends when the stream ends early (the client reset it, the
// connection ended) or the handler returns. false: the authority is
// invalid (a PROTOCOL_ERROR, as x/net answers it).
func (x *wireExchange) open(h *wireHandler, st *h2wire.Stream) (*http.Request, bool) {
	x.st = st
	x.ctx, x.cancel = context.WithCancel(context.Background())
	st.AfterDone(x.cancel)
	uri, host := x.strings(st)
	if host != "" && !validAuthority(host) {
		return nil, false
	}
	path, q := uri, ""
	for i := 0; i < len(path); i++ {
		if path[i] == '?' {
			path, q = path[:i], path[i+1:]
			break
		}
	}
	x.url = url.URL{Path: path, RawQuery: q}
	cl := st.ContentLength()
	if st.NoBody() {
		cl = 0
	}
	x.req = http.Request{
		Method: methodString(st.Method()), URL: &x.url, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: x.hdr, Body: &x.body, ContentLength: cl, Host: host,
		RemoteAddr: h.remote, RequestURI: uri,
	}
	x.declareTrailers()
	x.w.open(st, x.req.Method == http.MethodHead)
	return x.req.WithContext(x.ctx), true
}

// validAuthority applies x/net's checks on :authority: a valid Host
// value without userinfo.
func validAuthority(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] == '@' {
			return false
		}
	}
	return httpguts.ValidHostHeader(host)
}

// methodString returns the method's string: the constant for the usual
// ones (no allocation).
func methodString(m []byte) string {
	for _, k := range knownMethods {
		if string(m) == k {
			return k
		}
	}
	return string(m)
}

var knownMethods = [...]string{
	http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete,
	http.MethodOptions, http.MethodPatch, http.MethodConnect, http.MethodTrace,
}
