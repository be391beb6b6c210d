package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
)

// serveH2 serves one HTTP/2 connection (h2 after ALPN, or h2c with prior
// knowledge, in which case replay holds the bytes already read) with
// x/net/http2's server: its framing, flow control and HPACK are the
// reference implementation, and its per-stream handler is the engine
// below, which fills the same View and builds the same upstream head as
// the HTTP/1.1 engine.
func (s *Server) serveH2(c net.Conn, replay *prefaceConn, secure bool, ageAt int64) {
	var conn net.Conn = c
	if replay != nil {
		conn = replay
	}
	hc := s.newH2Conn(c)
	s.trackH2(hc)
	defer s.untrackH2(hc)
	hc.armAge(ageAt, s.cfg.AgeGrace)
	defer hc.stopAge()
	h := &h2handler{s: s, conn: hc, secure: secure, peer: peerOf(c)}
	h.trusted = trusted(s.cfg.TrustedProxies, h.peer.Addr())
	hc.srv.ServeConn(conn, &http2.ServeConnOpts{
		Handler:    httpserver.Handler(h, s.cfg.BodyTimeout, s.cfg.SendTimeout),
		BaseConfig: &hc.hs,
	})
}

// h2handler is the HTTP/2 engine for one connection.
type h2handler struct {
	s       *Server
	conn    *h2conn
	secure  bool
	trusted bool
	peer    netip.AddrPort
}

// stdHeader is request.Header over an http.Header.
type stdHeader http.Header

func (h stdHeader) Get(name string) (string, bool) {
	vs := http.Header(h).Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func (h stdHeader) Values(name string, fn func(string) bool) {
	for _, v := range http.Header(h).Values(name) {
		if !fn(v) {
			return
		}
	}
}

func (h *h2handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.conn.streamBegun()
	defer h.s.streamEnded(h.conn)
	path, query, hasQ := strings.Cut(r.RequestURI, "?")
	st := h2streams.Get().(*h2stream)
	defer st.release()
	st.host = normalHost(st.host[:0], sbytes(r.Host))
	v := request.View{
		Method: r.Method, Host: bstr(st.host), Path: path, Query: query,
		Major: r.ProtoMajor, Minor: r.ProtoMinor, Secure: h.secure, Client: h.peer,
		Trusted: h.trusted, Proxies: h.s.cfg.TrustedProxies, Header: stdHeader(r.Header),
	}
	isHead := r.Method == http.MethodHead
	if len(r.Header["Content-Length"]) > 1 {
		// x/net/http2 reads the first of several Content-Length fields
		// (none on a stream without DATA); the HTTP/1.1 engine refuses a
		// second one, equal or not, and so does this one.
		problemTwoLengths.writeHTTP(w, isHead, !h.s.cfg.OmitReason)
		return
	}
	if r.Method == http.MethodConnect {
		problemConnect.writeHTTP(w, false, !h.s.cfg.OmitReason)
		return
	}
	if dotSegment(sbytes(path)) {
		problemDotSegments.writeHTTP(w, isHead, !h.s.cfg.OmitReason)
		return
	}
	rt, ok := h.s.route().Route(&v)
	if !ok {
		problemNoRoute.writeHTTP(w, isHead, !h.s.cfg.OmitReason)
		return
	}
	rec := &st.rec
	rec.begin(rt, &h.s.cfg)
	defer h.endStream(rec, r)
	if rec.log {
		rec.method, rec.host, rec.path = r.Method, string(st.host), path
	}
	if rt.MaxBodyBytes > 0 && r.ContentLength > rt.MaxBodyBytes {
		rec.answer(w, problemBodyTooLarge, isHead)
		return
	}
	o := h.outbound(st, r, path, query, hasQ)
	forwardStd(h.s, w, r, &v, rt, o, rec, &st.pass)
}

// problemTwoLengths answers an HTTP/2 request with several Content-Length
// fields, as httpwire's refusal does over HTTP/1.1.
var problemTwoLengths = NewProblem(http.StatusBadRequest, "bad-request", "duplicate Content-Length", "")

// h2stream is one HTTP/2 request's scratch space, pooled: the View's
// host, the sorted field names and the outbound description, reused so
// that a stream costs the engine few allocations of its own.
type h2stream struct {
	o     outbound
	names []string
	host  []byte
	rec   record
	pass  chain.Pass
}

var h2streams = sync.Pool{New: func() any { return new(h2stream) }}

// release clears the stream's references and pools it.
func (st *h2stream) release() {
	clear(st.o.fields)
	clear(st.names)
	st.o = outbound{fields: st.o.fields[:0], xff: st.o.xff[:0], fwd: st.o.fwd[:0]}
	st.names = st.names[:0]
	st.rec = record{}
	st.pass.Clear()
	h2streams.Put(st)
}

// outbound describes an HTTP/2 request for appendHead: its fields sorted
// by name (a map has no order; sorting makes the upstream head
// deterministic), Host first. The bytes are views of the request's
// strings, never written.
func (h *h2handler) outbound(st *h2stream, r *http.Request, path, query string, hasQ bool) *outbound {
	o := &st.o
	o.method, o.path, o.host = sbytes(r.Method), sbytes(path), sbytes(r.Host)
	o.peer, o.secure, o.trusted, o.hop = h.peer, h.secure, h.trusted, staticHop
	o.query = nil
	if hasQ {
		o.query = sbytes(query)
		if o.query == nil {
			o.query = []byte{}
		}
	}
	names := st.names[:0]
	for k := range r.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	st.names = names
	o.fields = append(o.fields[:0], httpwire.Field{Name: hostName, Value: o.host})
	for _, k := range names {
		for _, v := range r.Header[k] {
			o.fields = append(o.fields, httpwire.Field{Name: sbytes(k), Value: sbytes(v)})
		}
	}
	switch {
	case r.ContentLength > 0 || r.ContentLength == 0 && r.Body != nil && r.Body != http.NoBody && bodyAllowedEmpty(o.method):
		o.length = r.ContentLength
	case r.ContentLength < 0:
		o.length = bodyChunked
	default:
		o.length = bodyNone
	}
	return o
}

var hostName = []byte("Host")

// staticHop is the hop-by-hop test for HTTP/2 requests: HTTP/2 forbids
// connection-specific fields (x/net/http2 refuses them), so only the
// fixed list applies.
func staticHop(name []byte) bool {
	for _, h := range hopByHop {
		if httpwire.EqualFold(name, h) {
			return true
		}
	}
	return false
}

var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
