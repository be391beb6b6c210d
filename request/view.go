// Package request holds the gateway's engine-neutral view of one HTTP
// request: what routing, and later the policy chain, may read of it. Every
// engine (the HTTP/1.1 engine, the HTTP/2 and h2c engine, the simulator)
// fills a View without copying headers into a map, so one route table and
// one chain serve them all.
//
// A View and the strings it hands out may point into the engine's read
// buffer: they are valid until the request completes, and must be copied to
// be kept longer.
package request

import "net/netip"

// Header looks up request header fields by name. Name matching is
// ASCII case-insensitive. Get returns the first field's value; Values calls
// fn for every field of that name, in the order received, until fn returns
// false.
type Header interface {
	Get(name string) (value string, ok bool)
	Values(name string, fn func(value string) bool)
}

// View is one request as routing sees it.
type View struct {
	// Method as received (methods are case-sensitive: "GET", not "get").
	Method string
	// Host is the request's authority without its port, lowercased, with
	// no trailing dot: the Host field for HTTP/1.1, :authority for HTTP/2.
	Host string
	// Path is the request target's path as received (still percent-encoded),
	// without the query; "*" for OPTIONS *.
	Path string
	// Query is the part after '?', without it; empty when there is none.
	Query string
	// Major and Minor are the protocol version the client spoke (1.1, 2.0).
	Major, Minor int
	// Secure is true when the client connected over TLS.
	Secure bool
	// Client is the address of the peer that opened the connection (after
	// a PROXY protocol header, the address it carries).
	Client netip.AddrPort
	// Trusted reports that the peer is one of the listener's trusted
	// proxies: its forwarding headers (X-Forwarded-For, Forwarded) and the
	// gateway's control headers (Spillway-Criticality, Spillway-Timeout,
	// the brownout header) are believed. From any other peer they are not.
	Trusted bool
	// Proxies are the networks the listener trusts, for finding the client
	// behind a chain of them (X-Forwarded-For read right to left while the
	// hop is trusted); nil: none. Shared, never modified.
	Proxies []netip.Prefix
	// Header gives the request's fields; nil means none.
	Header Header
}

// Get returns the first value of the named header field; ok is false when
// the request has none (or when v.Header is nil).
func (v *View) Get(name string) (string, bool) {
	if v.Header == nil {
		return "", false
	}
	return v.Header.Get(name)
}
