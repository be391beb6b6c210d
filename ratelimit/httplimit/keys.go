package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"

	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// Request keys: the value a rule counts a request under, from its key parts.

// key returns rule ru's key for the request, or ok false when a key part
// is missing. A single part's value is the key itself (no allocation);
// several are joined with '|', escaping '|' and '\' in values.
func (l *Limiter) key(s *ruleSet, ru *rule, in *incoming, route string) (string, bool) {
	switch len(ru.Key) {
	case 0:
		return rules.GlobalKey, true
	case 1:
		v, ok := l.part(s, ru.Key[0], in, route)
		if ok && len(v) > MaxKeyPartBytes {
			v = string(appendHashed(nil, v))
		}
		return v, ok
	}
	var buf [256]byte
	b := buf[:0]
	for i, p := range ru.Key {
		v, ok := l.part(s, p, in, route)
		if !ok {
			return "", false
		}
		if i > 0 {
			b = append(b, '|')
		}
		if len(v) > MaxKeyPartBytes {
			b = appendHashed(b, v)
			continue
		}
		for j := 0; j < len(v); j++ {
			if v[j] == '|' || v[j] == '\\' {
				b = append(b, '\\')
			}
			b = append(b, v[j])
		}
	}
	return string(b), true
}

func appendHashed(b []byte, v string) []byte {
	sum := sha256.Sum256([]byte(v))
	b = append(b, '#')
	return hex.AppendEncode(b, sum[:16])
}

// part returns one key part's value; ok is false when it is missing or
// empty.
func (l *Limiter) part(s *ruleSet, p rules.KeyPart, in *incoming, route string) (string, bool) {
	switch p.Kind {
	case rules.PartIP:
		if in.ipState == 0 {
			in.ip, in.ipState = l.ipKey(s, in), -1
			if in.ip != "" {
				in.ipState = 1
			}
		}
		return in.ip, in.ipState == 1
	case rules.PartMethod:
		return in.method, in.method != ""
	case rules.PartPath:
		return in.cleanPath(), true
	case rules.PartRoute:
		if route == "" {
			route = in.route
		}
		return route, route != ""
	case rules.PartIdentity:
		if v, ok := l.identity(in, p.Name); ok {
			return v, v != ""
		}
	}
	return in.header(p.Header)
}

// identity resolves a named part with Config.Identity or IdentityView.
func (l *Limiter) identity(in *incoming, name string) (string, bool) {
	switch {
	case in.hr != nil && l.cfg.Identity != nil:
		return l.cfg.Identity(in.hr, name)
	case in.view != nil && l.cfg.IdentityView != nil:
		return l.cfg.IdentityView(in.view, name)
	}
	return "", false
}

// ipKey returns the "ip" key part of the request: the client address,
// IPv6 cut to the set's prefix length; "" when there is none.
func (l *Limiter) ipKey(s *ruleSet, in *incoming) string {
	var a netip.Addr
	var text string
	var ok bool
	if in.hr != nil {
		var values []string
		if len(s.trusted) > 0 {
			values = in.hr.Header[s.fwdHeader]
		}
		a, text, ok = clientIP(in.hr.RemoteAddr, values, s.forwarded, s.trusted)
	} else {
		a, text, ok = in.viewClientIP(s)
	}
	if !ok {
		return ""
	}
	return in.cache.key(a, text, s.v6bits)
}

// ipCache keeps the key part of the last client address formatted, so
// that a connection's requests format it once.
type ipCache struct {
	addr netip.Addr
	bits int
	text string
}

// key returns the key part of client address a, whose text as received is
// text ("" when a was never text): IPv6 cut to bits, canonical form.
func (c *ipCache) key(a netip.Addr, text string, bits int) string {
	v6 := a.Is6() && bits < 128
	if !v6 && text != "" {
		var buf [64]byte
		if string(a.AppendTo(buf[:0])) == text {
			return text // already canonical: no allocation
		}
	}
	if c.addr == a && c.bits == bits {
		return c.text
	}
	var t string
	if v6 {
		p, err := a.Prefix(bits)
		if err != nil {
			return ""
		}
		t = p.String()
	} else {
		t = a.String()
	}
	c.addr, c.bits, c.text = a, bits, t
	return t
}
