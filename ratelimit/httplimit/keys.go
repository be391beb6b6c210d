package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// Request keys: the value a rule counts a request under, from its key parts.

// key returns rule ru's key for the request, or ok false when a key part
// is missing. A single part's value is the key itself (no allocation);
// several are joined with '|', escaping '|' and '\' in values.
func (l *Limiter) key(s *ruleSet, ru *rule, rq *request, route string) (string, bool) {
	switch len(ru.Key) {
	case 0:
		return rules.GlobalKey, true
	case 1:
		v, ok := l.part(s, ru.Key[0], rq, route)
		if ok && len(v) > MaxKeyPartBytes {
			v = string(appendHashed(nil, v))
		}
		return v, ok
	}
	var buf [256]byte
	b := buf[:0]
	for i, p := range ru.Key {
		v, ok := l.part(s, p, rq, route)
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
func (l *Limiter) part(s *ruleSet, p rules.KeyPart, rq *request, route string) (string, bool) {
	r := rq.r
	switch p.Kind {
	case rules.PartIP:
		if rq.ipState == 0 {
			rq.ip, rq.ipState = l.ipKey(s, r), -1
			if rq.ip != "" {
				rq.ipState = 1
			}
		}
		return rq.ip, rq.ipState == 1
	case rules.PartMethod:
		return r.Method, r.Method != ""
	case rules.PartPath:
		return rq.path, true
	case rules.PartRoute:
		if route == "" {
			route = r.Pattern
		}
		return route, route != ""
	case rules.PartIdentity:
		if l.cfg.Identity != nil {
			if v, ok := l.cfg.Identity(r, p.Name); ok {
				return v, v != ""
			}
		}
	}
	if v := r.Header[p.Header]; len(v) > 0 && v[0] != "" {
		return v[0], true
	}
	return "", false
}

// ipKey returns the "ip" key part of r: the client address, IPv6 cut to
// the set's prefix length; "" when there is none.
func (l *Limiter) ipKey(s *ruleSet, r *http.Request) string {
	var values []string
	if len(s.trusted) > 0 {
		values = r.Header[s.fwdHeader]
	}
	a, text, ok := clientIP(r.RemoteAddr, values, s.forwarded, s.trusted)
	if !ok {
		return ""
	}
	if a.Is6() && s.v6bits < 128 {
		p, err := a.Prefix(s.v6bits)
		if err != nil {
			return ""
		}
		return p.String()
	}
	var buf [64]byte
	if text != "" && string(a.AppendTo(buf[:0])) == text {
		return text // already canonical: no allocation
	}
	return a.String()
}
