package balancer

import (
	"net/http"
	"net/netip"
	"strings"
)

// HashPolicy says which part of an HTTP request is its consistent-hashing
// key, so that requests with the same key reach the same endpoint of a Ring
// or Maglev table. The sources are tried in the order of the fields —
// Header, Cookie, ClientIP, Path — and the first that yields a non-empty
// value is the key, as when every entry of an Envoy route's hash_policy list
// is terminal (Envoy without terminal combines the hashes of all entries
// that yield). The zero value has no source and yields no key. A HashPolicy
// is a plain value: safe for concurrent use.
type HashPolicy struct {
	// Header names a request header whose first value is the key; "" for
	// none. Give it in canonical form ("X-User-Id") to spare Key an
	// allocation per call; any case works.
	Header string
	// Cookie names a cookie whose value is the key (surrounding double
	// quotes removed); "" for none. Unlike Envoy, a missing cookie is not
	// generated: the next source is tried.
	Cookie string
	// ClientIP makes the peer's IP address (http.Request.RemoteAddr without
	// its port) the key. It is the direct peer's address; behind a proxy, put
	// the trusted client address in a header and use Header instead.
	ClientIP bool
	// Path makes the URL path (r.URL.Path, without the query) the key.
	Path bool
}

// Key returns the hash of r's key and true, or 0 and false when no source
// of p yields a value (the caller then balances the request another way,
// as Envoy picks at random). Header, cookie and path values hash as
// HashString(value); a client IP hashes as HashBytes of its 16-byte form
// (an IPv4 address as IPv4-mapped IPv6, so "192.0.2.1" and
// "::ffff:192.0.2.1" agree; a zone is ignored). A RemoteAddr that is not
// an IP address yields nothing. Key does not allocate, except to
// canonicalise a non-canonical Header name and for an IPv6 RemoteAddr with
// a zone.
func (p HashPolicy) Key(r *http.Request) (uint64, bool) {
	if p.Header != "" {
		if v := r.Header.Get(p.Header); v != "" {
			return HashString(v), true
		}
	}
	if p.Cookie != "" {
		if v := cookieValue(r.Header, p.Cookie); v != "" {
			return HashString(v), true
		}
	}
	if p.ClientIP {
		if ip, ok := remoteIP(r.RemoteAddr); ok {
			b := ip.As16()
			return HashBytes(b[:]), true
		}
	}
	if p.Path && r.URL != nil && r.URL.Path != "" {
		return HashString(r.URL.Path), true
	}
	return 0, false
}

// cookieValue returns the value of the first cookie called name in h's
// Cookie lines, without surrounding double quotes, or "". It parses in
// place without allocating (http.Request.Cookie builds every cookie).
func cookieValue(h http.Header, name string) string {
	for _, line := range h["Cookie"] {
		if v := cookieIn(line, name); v != "" {
			return v
		}
	}
	return ""
}

// remoteIP parses the address of a RemoteAddr: "host:port", "[v6]:port",
// or a bare address.
func remoteIP(addr string) (netip.Addr, bool) {
	if addr == "" {
		return netip.Addr{}, false
	}
	host := addr
	if addr[0] == '[' {
		end := strings.IndexByte(addr, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host = addr[1:end]
	} else if i := strings.LastIndexByte(addr, ':'); i >= 0 && strings.IndexByte(addr, ':') == i {
		host = addr[:i] // one colon: IPv4 or name with a port
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip, true
}
