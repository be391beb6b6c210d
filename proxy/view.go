package proxy

import (
	"net"
	"net/netip"
	"unsafe"

	"github.com/spillwayhq/spillway/httpwire"
)

// fieldHeader is request.Header over a parsed HTTP/1.1 head.
type fieldHeader struct{ h *httpwire.RequestHead }

func (f *fieldHeader) Get(name string) (string, bool) {
	for i := range f.h.Fields {
		if equalFold(f.h.Fields[i].Name, name) {
			return bstr(f.h.Fields[i].Value), true
		}
	}
	return "", false
}

func (f *fieldHeader) Values(name string, fn func(string) bool) {
	for i := range f.h.Fields {
		if equalFold(f.h.Fields[i].Name, name) && !fn(bstr(f.h.Fields[i].Value)) {
			return
		}
	}
}

// equalFold compares a field name to a name of any case, ASCII only.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// bstr views b as a string without copying; valid while b is unchanged.
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// normalHost appends host lowercased, without port and trailing dot.
func normalHost(dst, host []byte) []byte {
	h := host
	if len(h) > 0 && h[0] == '[' { // [v6]:port
		for i, c := range h {
			if c == ']' {
				h = h[:i+1]
				break
			}
		}
	} else {
		for i := len(h) - 1; i >= 0; i-- {
			if h[i] == ':' {
				h = h[:i]
				break
			}
			if h[i] < '0' || h[i] > '9' {
				break
			}
		}
	}
	if n := len(h); n > 0 && h[n-1] == '.' {
		h = h[:n-1]
	}
	for _, c := range h {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// peerOf returns the remote address of c (zero when not TCP).
func peerOf(c net.Conn) netip.AddrPort {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	return netip.AddrPort{}
}

// trusted reports whether a is in one of the prefixes.
func trusted(list []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allowedUpgrade reports whether every token of an Upgrade value is in the
// route's allowlist (lowercase tokens). h2c never is, even when listed:
// the deprecated h2c upgrade (RFC 9113 retires it) would turn the
// connection into a tunnel to one backend, past routing.
func allowedUpgrade(allow []string, v []byte) bool {
	ok := false
	for len(v) > 0 {
		var tok []byte
		tok, v = nextToken(v)
		if len(tok) == 0 {
			continue
		}
		if httpwire.EqualFold(tok, "h2c") {
			return false
		}
		found := false
		for _, a := range allow {
			if httpwire.EqualFold(tok, a) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
		ok = true
	}
	return ok
}

// nextToken splits a comma-separated list, trimming spaces.
func nextToken(v []byte) (tok, rest []byte) {
	i := 0
	for i < len(v) && v[i] != ',' {
		i++
	}
	tok, rest = v[:i], v[min(i+1, len(v)):]
	for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
		tok = tok[1:]
	}
	for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
		tok = tok[:len(tok)-1]
	}
	return tok, rest
}

// protocolProblems holds one pre-built Problem per parser refusal (the
// fixed set httpwire.Refusals lists, plus the engine's own), keyed by the
// *httpwire.Error: built once, read without a lock.
var protocolProblems = func() map[*httpwire.Error]*Problem {
	m := map[*httpwire.Error]*Problem{}
	for _, e := range append(httpwire.Refusals(), errHeadTooLarge) {
		m[e] = NewProblem(e.Status, "bad-request", e.Reason, "")
	}
	return m
}()

// protocolProblem returns the answer to a refusal; an *Error not built in
// advance (none today) gets a Problem made for it.
func protocolProblem(e *httpwire.Error) *Problem {
	if p, ok := protocolProblems[e]; ok {
		return p
	}
	return NewProblem(e.Status, "bad-request", e.Reason, "")
}

// sbytes views s as bytes without copying; the bytes must not be changed.
func sbytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
