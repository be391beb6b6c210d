package httplimit

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/request"
)

// incoming is the request being decided as the decision core reads it,
// filled from an *http.Request (Handler) or a request.View (Check), with
// what several rules need computed once. It lives in the pooled decisions.
type incoming struct {
	hr     *http.Request // Handler's request; nil for a View
	view   *request.View // Check's request; nil for an *http.Request
	method string
	// path is the request's path, percent-decoded (a View's) and cleaned
	// once a rule asks for it (cleanPath): clean false, it is raw, as
	// received.
	path  string
	clean bool
	route string   // the "route" part when the matched rule names no pattern
	cache *ipCache // the verdict's
	// ip is the "ip" key part; ipState 0 not computed, 1 present, -1
	// missing.
	ip      string
	ipState int8
	// lines collects a View's forwarding header lines; collect is addLine
	// bound once, for Header.Values.
	lines   []string
	collect func(string) bool
}

func (in *incoming) fromHTTP(r *http.Request, cache *ipCache) {
	in.hr, in.method, in.route, in.cache = r, r.Method, r.Pattern, cache
	in.path = r.URL.Path
}

// fromView fills in from v.
func (in *incoming) fromView(v *request.View, route string, cache *ipCache) {
	in.view, in.method, in.route, in.cache = v, v.Method, route, cache
	in.path = v.Path
}

// cleanPath returns the request's path as the rules match it, computed
// the first time a rule asks (most rules name no path: their requests
// skip the work). An *http.Request's path is decoded already; a View's is
// decoded here as net/http decodes a request's (url.PathUnescape;
// allocating only when there is an escape), so that "/l%6Fgin" meets the
// rules of "/login" under both engines; a malformed escape, which
// net/http refuses with 400, is left as received.
func (in *incoming) cleanPath() string {
	if in.clean {
		return in.path
	}
	p := in.path
	if in.view != nil && strings.IndexByte(p, '%') >= 0 {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
	}
	in.path, in.clean = rules.CleanPath(p), true
	return in.path
}

// reset clears in for the pool, keeping its line buffer and collector.
func (in *incoming) reset() {
	clear(in.lines)
	*in = incoming{lines: in.lines[:0], collect: in.collect}
}

func (in *incoming) addLine(v string) bool {
	in.lines = append(in.lines, v)
	return true
}

// header returns the first value of a header field (name in canonical
// form); ok is false when it is missing or empty.
func (in *incoming) header(name string) (string, bool) {
	if in.hr != nil {
		if v := in.hr.Header[name]; len(v) > 0 && v[0] != "" {
			return v[0], true
		}
		return "", false
	}
	v, ok := in.view.Get(name)
	return v, ok && v != ""
}

// viewClientIP returns the client address of a View and its text when it
// came from the forwarding header ("" for the peer's): the peer, unless
// the listener trusts it (v.Trusted); then the set's forwarding header is
// walked from the right while its hops are in v.Proxies, as ClientIP
// walks it. ok is false when the View has no peer address.
func (in *incoming) viewClientIP(s *ruleSet) (netip.Addr, string, bool) {
	v := in.view
	peer := v.Client.Addr().Unmap().WithZone("")
	if !peer.IsValid() {
		return netip.Addr{}, "", false
	}
	if !v.Trusted || v.Header == nil {
		return peer, "", true
	}
	in.lines = in.lines[:0]
	v.Header.Values(s.fwdHeader, in.collect)
	a, text := walkForwarded(peer, "", in.lines, s.forwarded, v.Proxies)
	return a, text, true
}
