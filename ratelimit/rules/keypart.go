package rules

import (
	"fmt"
	"net/textproto"
	"strings"
)

// PartKind is where a key part's value comes from.
type PartKind uint8

// The kinds of key part.
const (
	// PartIP is the client IP ("ip"): the connection's peer address, or the
	// address a trusted proxy forwarded (see Set.TrustedProxies). IPv6
	// addresses are cut to Set.IPv6Prefix bits.
	PartIP PartKind = iota + 1
	// PartMethod is the request method ("method").
	PartMethod
	// PartPath is the request path, cleaned as by path.Clean ("path").
	PartPath
	// PartRoute is the path pattern of the rule's Match that the request
	// matched, so /users/1 and /users/2 share the key of /users/{id}
	// ("route"). A rule without match paths uses the request's ServeMux
	// pattern (http.Request.Pattern) when the limiter runs inside a mux;
	// without either, the part is missing.
	PartRoute
	// PartHeader is a request header's first value ("header:Name").
	PartHeader
	// PartIdentity is a named identity ("user", "tenant"...), read from
	// Header unless the middleware resolves the name itself.
	PartIdentity
)

var builtinParts = map[string]PartKind{"ip": PartIP, "method": PartMethod, "path": PartPath, "route": PartRoute}

// KeyPart is one component of a rule's key.
type KeyPart struct {
	// Kind is where the value comes from.
	Kind PartKind
	// Name is the part as the file writes it: "ip", "user",
	// "header:X-Device-Id".
	Name string
	// Header is the canonical header name, for PartHeader and PartIdentity.
	Header string
}

// ParseKeyPart returns the key part a rules file writes as name: a built-in
// ("ip", "method", "path", "route"), "header:Name", or an identity name
// looked up in ids and then in DefaultIdentities.
func ParseKeyPart(name string, ids map[string]Identity) (KeyPart, error) {
	if k, ok := builtinParts[name]; ok {
		return KeyPart{Kind: k, Name: name}, nil
	}
	if h, ok := strings.CutPrefix(name, "header:"); ok {
		h = strings.TrimSpace(h)
		if !validHeaderName(h) {
			return KeyPart{}, fmt.Errorf("%w: %q is not a valid header name", ErrInvalid, h)
		}
		return KeyPart{Kind: PartHeader, Name: name, Header: textproto.CanonicalMIMEHeaderKey(h)}, nil
	}
	id, ok := ids[name]
	if !ok {
		id, ok = DefaultIdentities()[name]
	}
	if !ok {
		return KeyPart{}, fmt.Errorf("%w: unknown key part %q (built-ins: ip, method, path, route, header:Name; "+
			"identities: user, tenant, phone, apikey, or one defined under identities:)", ErrInvalid, name)
	}
	return KeyPart{Kind: PartIdentity, Name: name, Header: id.Header}, nil
}

// validate returns why p cannot be used, or "".
func (p KeyPart) validate() string {
	switch p.Kind {
	case PartIP, PartMethod, PartPath, PartRoute:
		if p.Header != "" {
			return fmt.Sprintf("part %q takes no header", p.Name)
		}
		return ""
	case PartHeader, PartIdentity:
		if !validHeaderName(p.Header) {
			return fmt.Sprintf("part %q: header %q is not a valid header name", p.Name, p.Header)
		}
		if p.Header != textproto.CanonicalMIMEHeaderKey(p.Header) {
			return fmt.Sprintf("part %q: header %q is not in canonical form", p.Name, p.Header)
		}
		if p.Kind == PartIdentity && validID(p.Name) != "" {
			return fmt.Sprintf("identity name %q: %s", p.Name, validID(p.Name))
		}
		return ""
	}
	return fmt.Sprintf("part %q has unknown kind %d", p.Name, p.Kind)
}

// validHeaderName reports whether h is a non-empty RFC 9110 token.
func validHeaderName(h string) bool {
	if h == "" || len(h) > 256 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}
