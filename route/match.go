package route

import (
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spillwayhq/spillway/request"
)

// Match is one route's condition. Every condition it sets must hold; the
// zero Match matches every request. At most one of Path, Prefix and Regex may
// be set.
type Match struct {
	// Hosts lists the host names the route serves; a request matches when
	// its View.Host matches any of them. A name is exact ("api.example.com",
	// or an IP literal) or a wildcard "*.example.com", which matches every
	// name with at least one more label in front ("a.example.com",
	// "a.b.example.com", not "example.com"). "*" matches any host. Names are
	// compared case-insensitively (Add lowercases them and drops a trailing
	// dot; View.Host is already lowercase, without port or trailing dot).
	// Empty means any host.
	Hosts []string
	// Path, when not empty, is the exact path ("/healthz"), or "*" for
	// OPTIONS *.
	Path string
	// Prefix, when not empty, is a path prefix matched on segment
	// boundaries: "/api" matches "/api" and "/api/…", not "/apix"; a prefix
	// ending in "/" matches everything that starts with it. It must begin
	// with "/"; "/" matches every path but "*".
	Prefix string
	// Regex, when not empty, is an RE2 expression (Go's regexp syntax) that
	// must match the whole path: "/v[0-9]+/.*" is anchored at both ends.
	Regex string
	// Methods lists the methods the route serves ("GET", "POST");
	// case-sensitive, as methods are. Empty means any method.
	Methods []string
	// Headers lists conditions on header fields; all must hold.
	Headers []HeaderMatch
}

// HeaderMatch is a condition on the header fields called Name (matched
// case-insensitively). Exactly one of Value, Regex and Present says what
// must hold:
//
//   - Value: some field of that name has exactly this value (values are
//     compared case-sensitively, as received, without splitting lists at
//     commas);
//   - Regex: some field's value matches this RE2 expression, anchored at
//     both ends;
//   - Present: the request has a field of that name, whatever its value.
//
// Invert negates the result: with Present, the field must be absent; with
// Value or Regex, no field of that name may match (a request without the
// field matches).
type HeaderMatch struct {
	Name    string
	Value   string
	Regex   string
	Present bool
	Invert  bool
}

// Errors returned by Add, Freeze and Validate. Use errors.Is.
var (
	// ErrInvalid: a Match is malformed; the error is a *MatchError naming
	// the field.
	ErrInvalid = errors.New("route: invalid match")
	// ErrFrozen: Add was called on a frozen Table.
	ErrFrozen = errors.New("route: table is frozen: add every route before Freeze")
)

// MatchError reports what is wrong with a Match. It wraps ErrInvalid.
type MatchError struct {
	// Route is the index the route would have had in its Table (the number
	// of routes added before it); -1 from Match.Validate.
	Route int
	// Field names the bad field: "Hosts[1]", "Regex", "Headers[0].Name".
	Field string
	// Reason says what is wrong and what is expected.
	Reason string
}

func (e *MatchError) Error() string {
	if e.Route < 0 {
		return "route: " + e.Field + ": " + e.Reason
	}
	return "route " + strconv.Itoa(e.Route) + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalid.
func (e *MatchError) Unwrap() error { return ErrInvalid }

// Validate reports the first problem in m as a *MatchError with Route -1,
// or nil when Add would accept m.
func (m Match) Validate() error {
	_, err := compile(m)
	if err != nil {
		err.Route = -1
		return err
	}
	return nil
}

// Path kinds of a compiled match.
const (
	pathAny = iota
	pathExact
	pathPrefix
	pathRegex
)

// compiled is a validated Match in the form Lookup reads; immutable.
type compiled struct {
	exact    []string // exact host names, lowercase, deduplicated
	wild     []string // wildcard suffixes without "*.": "example.com"
	anyHost  bool     // no host condition (empty Hosts, or "*")
	pathKind uint8
	path     string         // exact path or prefix
	re       *regexp.Regexp // pathRegex: anchored
	methods  []string
	headers  []headerMatcher
}

// compile validates m and returns its compiled form, or a *MatchError whose
// Route the caller fills in.
func compile(m Match) (*compiled, *MatchError) {
	c := &compiled{anyHost: len(m.Hosts) == 0}
	if err := c.compileHosts(m.Hosts); err != nil {
		return nil, err
	}
	if err := c.compilePath(m); err != nil {
		return nil, err
	}
	for i, meth := range m.Methods {
		if reason := badMethod(meth); reason != "" {
			return nil, &MatchError{Field: "Methods[" + strconv.Itoa(i) + "]", Reason: reason}
		}
		if !slices.Contains(c.methods, meth) {
			c.methods = append(c.methods, meth)
		}
	}
	for i, hm := range m.Headers {
		h, err := compileHeader(hm)
		if err != nil {
			err.Field = "Headers[" + strconv.Itoa(i) + "]." + err.Field
			return nil, err
		}
		c.headers = append(c.headers, h)
	}
	return c, nil
}

// compileHosts sorts the host names into exact names and wildcard suffixes.
func (c *compiled) compileHosts(hosts []string) *MatchError {
	for i, h := range hosts {
		name, wild, reason := normalHost(h)
		if reason != "" {
			return &MatchError{Field: "Hosts[" + strconv.Itoa(i) + "]", Reason: strconv.Quote(h) + ": " + reason}
		}
		switch {
		case name == "*":
			c.anyHost = true
		case wild:
			if !slices.Contains(c.wild, name) {
				c.wild = append(c.wild, name)
			}
		default:
			if !slices.Contains(c.exact, name) {
				c.exact = append(c.exact, name)
			}
		}
	}
	if c.anyHost {
		c.exact, c.wild = nil, nil
	}
	return nil
}

// compilePath checks that at most one path condition is set and compiles it.
func (c *compiled) compilePath(m Match) *MatchError {
	set := 0
	for _, s := range []string{m.Path, m.Prefix, m.Regex} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return &MatchError{Field: "Path", Reason: "at most one of Path, Prefix and Regex may be set"}
	}
	switch {
	case m.Path != "":
		if m.Path != "*" && m.Path[0] != '/' {
			return &MatchError{Field: "Path", Reason: strconv.Quote(m.Path) + ": must begin with \"/\" (or be \"*\")"}
		}
		c.pathKind, c.path = pathExact, m.Path
	case m.Prefix != "":
		if m.Prefix[0] != '/' {
			return &MatchError{Field: "Prefix", Reason: strconv.Quote(m.Prefix) + ": must begin with \"/\""}
		}
		c.pathKind, c.path = pathPrefix, m.Prefix
	case m.Regex != "":
		re, reason := anchored(m.Regex)
		if reason != "" {
			return &MatchError{Field: "Regex", Reason: reason}
		}
		c.pathKind, c.re = pathRegex, re
	}
	return nil
}

// anchored compiles expr so that it must match a whole string. It compiles
// expr alone first, so that an unbalanced ")" cannot escape the wrapping
// group.
func anchored(expr string) (*regexp.Regexp, string) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, "not an RE2 expression: " + err.Error()
	}
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, "not an RE2 expression: " + err.Error()
	}
	return re, ""
}

// normalHost lowercases h and drops a trailing dot. It returns the name (the
// suffix after "*." for a wildcard, "*" for any host) or why h is not a host
// pattern.
func normalHost(h string) (name string, wild bool, reason string) {
	h = strings.ToLower(h)
	if h == "*" {
		return h, false, ""
	}
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		h, wild = rest, true
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", false, "empty host name"
	}
	if strings.Contains(h, "..") || h[0] == '.' {
		return "", false, "empty label"
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		case c == '*':
			return "", false, "a wildcard must be the whole leftmost label, as in \"*.example.com\" (or \"*\" for any host)"
		case c == ':' || c == '[' || c == ']':
			if !wild && isIPv6(h) {
				return h, false, ""
			}
			return "", false, "not a host name or IP address (write the host without its port)"
		default:
			return "", false, "character " + strconv.QuoteRune(rune(c)) + " is not allowed in a host name (write the name without scheme, port or path)"
		}
	}
	return h, wild, ""
}

// isIPv6 reports whether h is an IPv6 address, bare or in brackets.
func isIPv6(h string) bool {
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Is6()
}

// badMethod returns why meth is not a method token, or "".
func badMethod(meth string) string {
	if meth == "" {
		return "empty method"
	}
	for i := 0; i < len(meth); i++ {
		c := meth[i]
		if 'a' <= c && c <= 'z' {
			return strconv.Quote(meth) + ": methods are case-sensitive and written in capitals (\"GET\")"
		}
		if !isTokenChar(c) {
			return strconv.Quote(meth) + ": character " + strconv.QuoteRune(rune(c)) + " is not allowed in a method"
		}
	}
	return ""
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110
// tchar).
func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// matchRest reports whether v satisfies c's conditions other than the host.
func (c *compiled) matchRest(v *request.View) bool {
	switch c.pathKind {
	case pathExact:
		if v.Path != c.path {
			return false
		}
	case pathPrefix:
		if !hasPrefix(v.Path, c.path) {
			return false
		}
	case pathRegex:
		if !c.re.MatchString(v.Path) {
			return false
		}
	}
	if len(c.methods) > 0 && !slices.Contains(c.methods, v.Method) {
		return false
	}
	for i := range c.headers {
		if !c.headers[i].holds(v.Header) {
			return false
		}
	}
	return true
}

// matchHost reports whether host satisfies c's host condition (the linear
// scan of a table that is not frozen; the index answers this otherwise).
func (c *compiled) matchHost(host string) bool {
	if c.anyHost || slices.Contains(c.exact, host) {
		return true
	}
	for _, s := range c.wild {
		if coveredBy(host, s) {
			return true
		}
	}
	return false
}

// coveredBy reports whether the wildcard "*."+suffix matches host: host
// ends in "."+suffix with at least one character before that dot.
func coveredBy(host, suffix string) bool {
	n := len(host) - len(suffix)
	return n >= 2 && host[n-1] == '.' && host[n:] == suffix
}
