package proxy

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"sync/atomic"

	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/route"
)

// outbound is what the engines know of a request when they build its
// upstream head; both engines fill one, so both forward the same fields.
type outbound struct {
	method []byte
	path   []byte // as received, still encoded
	query  []byte // without '?'; nil when none
	host   []byte // Host / :authority as received (with port if any)
	fields []httpwire.Field
	// hop reports whether a field is hop-by-hop for this message (the
	// fixed list plus what its Connection field names).
	hop     func(name []byte) bool
	peer    netip.AddrPort
	secure  bool
	trusted bool // the peer is a trusted proxy: keep its X-Forwarded-*
	// length is the body's framing toward the upstream: >= 0 a
	// Content-Length, -1 chunked, -2 no body.
	length  int64
	upgrade []byte // the Upgrade value to forward (allowed by the route), or nil
	// xff and fwd collect a trusted peer's X-Forwarded-For and Forwarded
	// values; their capacity is reused from request to request.
	xff, fwd []byte
	// pass is the request's way through the route's policy chain (nil:
	// none) and now the time the head is built, for its control fields.
	pass *chain.Pass
	now  float64
	// idAt and idEnd locate the X-Request-Id value appendHead forwarded
	// (the client's, or one it made) in the head it returned.
	idAt, idEnd int
}

// bodyNone marks a request without a body in outbound.length.
const (
	bodyChunked = -1
	bodyNone    = -2
)

// appendHead appends the upstream request head for o on route rt.
func appendHead(dst []byte, o *outbound, rt *Route) []byte {
	dst = appendRequestLine(dst, o, rt)
	o.xff, o.fwd = o.xff[:0], o.fwd[:0]
	var g seen
	for i := range o.fields {
		f := &o.fields[i]
		switch {
		case o.hop(f.Name), isFraming(f.Name), removed(f.Name, rt.RequestRemove):
			continue
		case httpwire.EqualFold(f.Name, "x-forwarded-for"):
			if o.trusted {
				o.xff = appendList(o.xff, f.Value)
			}
			continue
		case httpwire.EqualFold(f.Name, "forwarded"):
			if o.trusted {
				o.fwd = appendList(o.fwd, f.Value)
			}
			continue
		case httpwire.EqualFold(f.Name, "x-forwarded-proto"):
			if !o.trusted || g.proto {
				continue
			}
			g.proto = true
		case httpwire.EqualFold(f.Name, "x-forwarded-host"):
			if !o.trusted || g.host {
				continue
			}
			g.host = true
		case httpwire.EqualFold(f.Name, "x-request-id"):
			if g.id || !validID(f.Value) {
				continue
			}
			g.id = true
			dst = httpwire.AppendField(dst, f.Name, f.Value)
			o.idEnd = len(dst) - 2
			o.idAt = o.idEnd - len(f.Value)
			continue
		case httpwire.EqualFold(f.Name, "expect"):
			continue // the gateway answers 100-continue itself
		case httpwire.EqualFold(f.Name, "host"):
			g.hostField = true
		case posesAsGatewayField(f.Name):
			continue
		case controlField(f.Name):
			if !o.trusted || o.pass != nil {
				continue // only a trusted peer's; the chain sends its own
			}
		case o.pass != nil && rt.GRPC && httpwire.EqualFold(f.Name, "grpc-timeout"):
			if _, ok := o.pass.Remaining(o.now); ok {
				continue // the remaining budget replaces it
			}
		}
		dst = httpwire.AppendField(dst, f.Name, f.Value)
	}
	return appendGatewayFields(dst, o, rt, g)
}

// seen records which forwarding fields a trusted client already sent,
// and whether the request had a Host field (an HTTP/1.0 one may not).
type seen struct{ proto, host, id, hostField bool }

// appendList appends v to a comma-separated list.
func appendList(list, v []byte) []byte {
	if len(list) > 0 {
		list = append(list, ", "...)
	}
	return append(list, v...)
}

// appendGatewayFields appends the fields the gateway sets: forwarding
// fields, request id, framing, upgrade, route additions, and the blank line.
func appendGatewayFields(dst []byte, o *outbound, rt *Route, g seen) []byte {
	if !g.hostField {
		// HTTP/1.0 without Host goes upstream as HTTP/1.1, which requires
		// one: the absolute-form target's authority, or empty (RFC 9112
		// section 3.2) when it has none.
		dst = append(append(append(dst, "Host: "...), o.host...), "\r\n"...)
	}
	var ip [64]byte
	addr := o.peer.Addr().Unmap().AppendTo(ip[:0])
	dst = append(dst, "X-Forwarded-For: "...)
	if len(o.xff) > 0 {
		dst = append(append(dst, o.xff...), ", "...)
	}
	dst = append(append(dst, addr...), "\r\n"...)
	proto := "http"
	if o.secure {
		proto = "https"
	}
	if !g.proto {
		dst = append(append(append(dst, "X-Forwarded-Proto: "...), proto...), "\r\n"...)
	}
	if !g.host && len(o.host) > 0 {
		dst = append(append(append(dst, "X-Forwarded-Host: "...), o.host...), "\r\n"...)
	}
	dst = append(dst, "Forwarded: "...)
	if len(o.fwd) > 0 {
		dst = append(append(dst, o.fwd...), ", "...)
	}
	dst = appendForwardedElem(dst, o.peer.Addr().Unmap(), addr, proto, o.host)
	if !g.id {
		dst = append(dst, "X-Request-Id: "...)
		o.idAt = len(dst)
		dst = appendRequestID(dst)
		o.idEnd = len(dst)
		dst = append(dst, "\r\n"...)
	}
	switch {
	case o.length >= 0 && (o.length > 0 || bodyAllowedEmpty(o.method)):
		dst = strconv.AppendInt(append(dst, "Content-Length: "...), o.length, 10)
		dst = append(dst, "\r\n"...)
	case o.length == bodyChunked:
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	if o.upgrade != nil {
		dst = append(append(append(dst, "Connection: Upgrade\r\nUpgrade: "...), o.upgrade...), "\r\n"...)
	}
	dst = appendControl(dst, o, rt)
	for _, f := range rt.RequestAdd {
		dst = append(append(append(append(dst, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// bodyAllowedEmpty reports whether a zero Content-Length is worth sending:
// for methods that carry a body, "Content-Length: 0" says it is empty.
func bodyAllowedEmpty(method []byte) bool {
	s := string(method) // no allocation: compared only
	return s == "POST" || s == "PUT" || s == "PATCH"
}

// appendRequestLine writes "METHOD target HTTP/1.1", the target rewritten
// by the route's prefix rule and always in origin form.
func appendRequestLine(dst []byte, o *outbound, rt *Route) []byte {
	dst = append(append(dst, o.method...), ' ')
	if rt.Prefix != "" {
		dst = route.RewritePrefix(dst, bstr(o.path), rt.Prefix, rt.RewritePrefix)
	} else {
		dst = append(dst, o.path...)
	}
	if o.query != nil {
		dst = append(append(dst, '?'), o.query...)
	}
	return append(dst, " HTTP/1.1\r\n"...)
}

// appendForwardedElem appends one RFC 7239 forwarded-element.
func appendForwardedElem(dst []byte, a netip.Addr, addr []byte, proto string, host []byte) []byte {
	dst = append(dst, "for="...)
	if a.Is6() {
		dst = append(append(append(dst, `"[`...), addr...), `]"`...)
	} else {
		dst = append(dst, addr...)
	}
	dst = append(append(dst, ";proto="...), proto...)
	if len(host) > 0 && forwardedToken(host) {
		dst = append(append(dst, ";host="...), host...)
	} else if len(host) > 0 {
		dst = strconv.AppendQuote(append(dst, ";host="...), string(host))
	}
	return append(dst, "\r\n"...)
}

// forwardedToken reports whether v can be sent as an RFC 7230 token.
func forwardedToken(v []byte) bool {
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// isFraming reports fields the gateway rewrites itself.
func isFraming(name []byte) bool {
	return httpwire.EqualFold(name, "content-length") || httpwire.EqualFold(name, "transfer-encoding")
}

// removed reports whether the route removes name (lowercase list).
func removed(name []byte, list []string) bool {
	for _, r := range list {
		if httpwire.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// validID accepts a client's request id of up to 128 visible characters.
func validID(v []byte) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// Request ids: 32 hex digits, a random process prefix and a counter, so
// ids are unique without a syscall or lock per request.
var (
	idPrefix  [8]byte
	idCounter atomic.Uint64
)

func init() {
	_, _ = rand.Read(idPrefix[:])
	idCounter.Store(binary.BigEndian.Uint64(idPrefix[:]) >> 16)
}

func appendRequestID(dst []byte) []byte {
	var b [16]byte
	copy(b[:8], idPrefix[:])
	binary.BigEndian.PutUint64(b[8:], idCounter.Add(1))
	n := len(dst)
	dst = append(dst, make([]byte, 32)...)
	hex.Encode(dst[n:], b[:])
	return dst
}

// gatewayFields are the fields the gateway sets, in the form CGI and WSGI
// servers give header names (dashes as underscores, so "X_Forwarded_For"
// and "X-Forwarded-For" both become HTTP_X_FORWARDED_FOR there).
var gatewayFields = []string{"x_forwarded_for", "x_forwarded_proto", "x_forwarded_host", "x_request_id", "forwarded"}

// posesAsGatewayField reports whether name, with an underscore in it,
// would read as one of the gateway's own fields once a backend maps
// dashes to underscores: such a field is dropped, or a client could spoof
// X-Forwarded-For past the gateway (nginx drops every underscored name by
// default; this drops only the ones that collide).
func posesAsGatewayField(name []byte) bool {
	under := false
	for _, c := range name {
		if c == '_' {
			under = true
			break
		}
	}
	if !under {
		return false
	}
	for _, g := range gatewayFields {
		if len(g) != len(name) {
			continue
		}
		same := true
		for i, c := range name {
			if c == '-' {
				c = '_'
			}
			if c|0x20 != g[i]|0x20 {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}
