package rules

import (
	"fmt"
	"path"
	"strings"
)

// Match selects the requests a rule applies to: a request matches when its
// method is one of Methods (or Methods is empty) and its cleaned path
// matches one of Paths (or Paths is empty).
//
// Path patterns are matched against the request path cleaned as by
// path.Clean ("/login/" and "/a/../login" are "/login"), segment by
// segment, with the wildcards of net/http's ServeMux:
//
//	/login          exactly /login
//	/api/*          /api and everything under it (/api/v1/users)
//	/users/{id}     /users/ and one more non-empty segment
//	/files/{p...}   like /files/*, naming the rest
//	/*              every path
//	/               exactly the root
//
// A wildcard is a whole segment; "*" and "{name...}" may only be last.
// Methods are matched exactly (a GET rule does not cover HEAD).
type Match struct {
	Methods []string // upper case, e.g. "POST"
	Paths   []string // patterns as above
}

// Matches reports whether a request with the given method and cleaned path
// matches m, and returns the first pattern in Paths that matched ("" when
// Paths is empty). It does not allocate.
func (m *Match) Matches(method, cleanPath string) (route string, ok bool) {
	if len(m.Methods) > 0 {
		found := false
		for _, x := range m.Methods {
			if x == method {
				found = true
				break
			}
		}
		if !found {
			return "", false
		}
	}
	if len(m.Paths) == 0 {
		return "", true
	}
	for _, p := range m.Paths {
		if MatchPath(p, cleanPath) {
			return p, true
		}
	}
	return "", false
}

// MatchPath reports whether the cleaned path p matches pattern pat (see
// Match). It does not allocate.
func MatchPath(pat, p string) bool {
	if len(pat) == 0 || pat[0] != '/' || len(p) == 0 || p[0] != '/' {
		return false
	}
	pat, p = pat[1:], p[1:]
	for pat != "" {
		seg, restPat, _ := strings.Cut(pat, "/")
		if seg == "*" || isRestWildcard(seg) {
			return true
		}
		if p == "" {
			return false
		}
		pseg, restP, _ := strings.Cut(p, "/")
		if !isWildcard(seg) && seg != pseg || pseg == "" {
			return false
		}
		pat, p = restPat, restP
	}
	return p == ""
}

// CleanPath returns p cleaned as Match expects: path.Clean of p with a
// leading slash; "/" for an empty path. It does not allocate when p is
// already clean.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		return path.Clean("/" + p)
	}
	return path.Clean(p)
}

func isWildcard(seg string) bool {
	return len(seg) >= 3 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

func isRestWildcard(seg string) bool {
	return isWildcard(seg) && strings.HasSuffix(seg, "...}")
}

// validate returns the first problem with m as a *FieldError, or nil.
func (m *Match) validate(rule string) error {
	if len(m.Methods) > MaxMatchEntries {
		return fieldErr(rule, "match.methods", "at most %d entries, got %d", MaxMatchEntries, len(m.Methods))
	}
	if len(m.Paths) > MaxMatchEntries {
		return fieldErr(rule, "match.paths", "at most %d entries, got %d", MaxMatchEntries, len(m.Paths))
	}
	for i, x := range m.Methods {
		if !validHeaderName(x) || strings.ToUpper(x) != x {
			return fieldErr(rule, fmt.Sprintf("match.methods[%d]", i), "%q is not an upper-case method name", x)
		}
	}
	for i, p := range m.Paths {
		if err := validPattern(p); err != "" {
			return fieldErr(rule, fmt.Sprintf("match.paths[%d]", i), "%s", err)
		}
	}
	return nil
}

// validPattern returns why pat is not a path pattern, or "".
func validPattern(pat string) string {
	if pat == "" || pat[0] != '/' {
		return fmt.Sprintf("%q must start with /", pat)
	}
	if len(pat) > 1024 {
		return "pattern longer than 1024 bytes"
	}
	if pat == "/" {
		return ""
	}
	if strings.HasSuffix(pat, "/") {
		return fmt.Sprintf("%q ends with /: request paths are cleaned, so write %q for a subtree or %q for the path itself",
			pat, pat+"*", strings.TrimRight(pat, "/"))
	}
	var names []string
	rest := pat[1:]
	for rest != "" {
		var seg string
		var more bool
		seg, rest, more = strings.Cut(rest, "/")
		switch {
		case seg == "":
			return fmt.Sprintf("%q has an empty segment", pat)
		case seg == "." || seg == "..":
			return fmt.Sprintf("%q has a %q segment, which a cleaned path never has", pat, seg)
		case seg == "*":
		case isWildcard(seg):
			name := strings.TrimSuffix(seg[1:len(seg)-1], "...")
			if !validWildcardName(name) {
				return fmt.Sprintf("%q: wildcard %s needs a name of letters, digits and _ (not starting with a digit)", pat, seg)
			}
			for _, n := range names {
				if n == name {
					return fmt.Sprintf("%q: wildcard name %q is used twice", pat, name)
				}
			}
			names = append(names, name)
		case strings.ContainsAny(seg, "{}*"):
			return fmt.Sprintf("%q: a wildcard must be a whole segment (%s)", pat, seg)
		}
		if (seg == "*" || isRestWildcard(seg)) && more {
			return fmt.Sprintf("%q: %s must be the last segment", pat, seg)
		}
	}
	return ""
}

func validWildcardName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
