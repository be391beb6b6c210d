package balancer

import (
	"strings"

	"github.com/spillwayhq/spillway/request"
)

// ViewKey is Key for the gateway's engine-neutral request view: the same
// sources in the same order, hashed the same way, so a request routed by
// the gateway and one sent through balancerhttp reach the same endpoint of
// one table. ClientIP is the connection's peer (View.Client). It does not
// allocate.
func (p HashPolicy) ViewKey(v *request.View) (uint64, bool) {
	if p.Header != "" {
		if s, ok := v.Get(p.Header); ok && s != "" {
			return HashString(s), true
		}
	}
	if p.Cookie != "" && v.Header != nil {
		var found string
		v.Header.Values("Cookie", func(line string) bool {
			found = cookieIn(line, p.Cookie)
			return found == ""
		})
		if found != "" {
			return HashString(found), true
		}
	}
	if p.ClientIP && v.Client.Addr().IsValid() {
		b := v.Client.Addr().WithZone("").As16()
		return HashBytes(b[:]), true
	}
	if p.Path && v.Path != "" {
		return HashString(v.Path), true
	}
	return 0, false
}

// cookieIn returns the value of the cookie called name in one Cookie line,
// without surrounding double quotes, or "".
func cookieIn(line, name string) string {
	for line != "" {
		var part string
		part, line, _ = strings.Cut(line, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || strings.TrimSpace(k) != name {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return v
	}
	return ""
}
