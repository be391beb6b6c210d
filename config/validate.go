package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spillwayhq/spillway/yamlfile"
)

// validator checks what the decoder cannot see field by field: names and
// references, fields that exclude each other, and the library's own
// Validate methods; it also fills the values derived from others.
type validator struct {
	d *decoder
	c *Config
	// clean: the decoder found no problem. The library's Validate methods
	// run only then: a value that failed to decode is left zero, which
	// they would report again in their own words.
	clean bool
}

// given reports whether the file wrote the value ptr points to.
func (v *validator) given(ptr any) bool {
	_, ok := v.c.pos.at(ptr)
	return ok
}

// decoded reports whether the value ptr points to was decoded without a
// problem at its position.
func (v *validator) decoded(ptr any) bool {
	p, _ := v.c.pos.at(ptr)
	if fe, ok := v.d.Err().(*yamlfile.FileError); ok {
		for _, e := range fe.Errors {
			if e.File == v.d.File && e.Line == p.Line && e.Column == p.Column {
				return false
			}
		}
	}
	return true
}

// problem reports at the first of ptrs the file wrote.
func (v *validator) problem(format string, args []any, ptrs ...any) {
	for _, p := range ptrs {
		if pos, ok := v.c.pos.at(p); ok {
			v.d.ProblemAt(pos.Line, pos.Column, format, args...)
			return
		}
	}
	v.d.ProblemAt(0, 0, format, args...)
}

// at is problem with the arguments inline: v.at(ptrs)("format", args...).
func (v *validator) at(ptrs ...any) func(format string, args ...any) {
	return func(format string, args ...any) { v.problem(format, args, ptrs...) }
}

func (v *validator) config() {
	c := v.c
	if v.given(&c.Version) && c.Version != 1 && v.decoded(&c.Version) {
		v.at(&c.Version)("version: want 1 (the only version there is), got %d", c.Version)
	}
	clusters := v.names("clusters", len(c.Clusters), func(i int) *string { return &c.Clusters[i].Name })
	routes := v.names("routes", len(c.Routes), func(i int) *string { return &c.Routes[i].Name })
	v.names("listeners", len(c.Listeners), func(i int) *string { return &c.Listeners[i].Name })
	addrs := map[string]string{}
	if c.Admin.Address != "" {
		addrs[c.Admin.Address] = "the admin address"
	}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		v.listener(i, l, clusters, routes)
		if prev, dup := addrs[l.Address]; dup && !strings.HasSuffix(l.Address, ":0") {
			v.at(&l.Address)("listeners[%d].address: %s is already %s", i, l.Address, prev)
		}
		addrs[l.Address] = fmt.Sprintf("listeners[%d]'s address", i)
	}
	for i := range c.Routes {
		v.route(i, &c.Routes[i], clusters)
	}
	for i := range c.Clusters {
		v.cluster(i, &c.Clusters[i])
	}
	v.policyChain(clusters)
	v.admin(&c.Admin)
	v.overload(&c.Overload)
	v.proxyProtocolUse()
}

// names reports names given twice and returns every name's index.
func (v *validator) names(list string, n int, name func(int) *string) map[string]int {
	seen := make(map[string]int, n)
	for i := range n {
		p := name(i)
		if *p == "" {
			continue // not decoded; reported
		}
		if j, dup := seen[*p]; dup {
			v.at(p)("%s[%d].name: %q is already the name of %s[%d]", list, i, *p, list, j)
			continue
		}
		seen[*p] = i
	}
	return seen
}

// ref reports a reference to a name that is not defined.
func (v *validator) ref(path string, p *string, what string, defined map[string]int) {
	if *p == "" {
		return
	}
	if _, ok := defined[*p]; ok {
		return
	}
	if v.d.Full() {
		v.d.Skip() // counted, not described: spare listing the names again
		return
	}
	v.at(p)("%s: no %s is named %q (%s)", path, what, *p, listNames(defined, what))
}

// listNames lists the defined names for a dangling-reference message.
func listNames(defined map[string]int, what string) string {
	if len(defined) == 0 {
		return "there are no " + what + "s"
	}
	names := make([]string, 0, len(defined))
	for n := range defined {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return defined[a] - defined[b] })
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return what + "s: " + strings.Join(names, ", ")
}

func (v *validator) listener(i int, l *Listener, clusters, routes map[string]int) {
	path := fmt.Sprintf("listeners[%d]", i)
	switch l.Protocol {
	case "tcp":
		if !v.given(&l.Cluster) {
			v.at(l)("%s: a tcp listener needs a cluster: to send its connections to", path)
		}
		if v.given(&l.Routes) {
			v.at(&l.Routes)("%s.routes: a tcp listener has no routes (it sends every connection to its cluster)", path)
		}
	case "http":
		if v.given(&l.Cluster) {
			v.at(&l.Cluster)("%s.cluster: only a tcp listener names a cluster (an http listener's routes do); set protocol: tcp or remove it", path)
		}
	}
	v.ref(path+".cluster", &l.Cluster, "cluster", clusters)
	for j := range l.Routes {
		v.ref(fmt.Sprintf("%s.routes[%d]", path, j), &l.Routes[j], "route", routes)
	}
	if l.TLS != nil {
		v.listenerTLS(path+".tls", l)
	}
}

func (v *validator) route(i int, r *Route, clusters map[string]int) {
	path := fmt.Sprintf("routes[%d]", i)
	v.ref(path+".cluster", &r.Cluster, "cluster", clusters)
	m := &r.Match
	if v.given(&m.Host) && v.given(&m.Hosts) {
		v.at(&m.Hosts)("%s.match.hosts: give host or hosts, not both", path)
	}
	if n := count(v.given(&m.Path), v.given(&m.Prefix), v.given(&m.Regex)); n > 1 {
		v.at(&m.Regex, &m.Prefix)("%s.match: give only one of path, prefix and regex", path)
	}
	if v.given(&m.Regex) {
		m.PathRegexp = anchored(m.Regex)
	}
	for j := range m.Headers {
		h := &m.Headers[j]
		h.HasPresent = v.given(&h.Present)
		if count(v.given(&h.Value), v.given(&h.Regex), h.HasPresent) != 1 {
			v.at(h)("%s.match.headers[%d]: give exactly one of value, regex and present", path, j)
		}
		if v.given(&h.Regex) {
			h.ValueRegexp = anchored(h.Regex)
		}
	}
	for j := range r.Upgrades {
		r.Upgrades[j] = strings.ToLower(r.Upgrades[j]) // tokens compare case-insensitively (RFC 9110)
	}
	if v.given(&r.Rewrite.Prefix) && !v.given(&m.Prefix) {
		v.at(&r.Rewrite.Prefix)("%s.rewrite.prefix: needs match.prefix (the part it replaces)", path)
	}
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// anchored compiles a regular expression that checkKind accepted so that
// it must match the whole string.
func anchored(re string) *regexp.Regexp {
	x, err := regexp.Compile(`^(?:` + re + `)$`)
	if err != nil {
		return nil // not decoded: reported already
	}
	return x
}
