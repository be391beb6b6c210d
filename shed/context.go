package shed

import (
	"context"
	"net/http"
)

// ClassHeader is the HTTP request header carrying a request's criticality
// class, in the form ParseClass reads and Class.String writes ("critical",
// "default", "sheddable", "class 5"). It is in canonical form, so it may
// index an http.Header directly.
const ClassHeader = "Spillway-Criticality"

// ClassMetadataKey is the gRPC metadata key carrying the class: ClassHeader
// in lower case, as gRPC metadata keys are.
const ClassMetadataKey = "spillway-criticality"

// classTrimOWS removes the optional whitespace (spaces and horizontal tabs)
// HTTP allows around a field value.
func classTrimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// equalASCIIFold reports whether s equals lower, a lower-case ASCII name,
// ignoring the case of ASCII letters only: unlike strings.EqualFold, no
// non-ASCII character (the long s, the Kelvin sign) matches an ASCII one.
func equalASCIIFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// digitClass returns the class named by one decimal digit below MaxClasses.
func digitClass(s string) (Class, bool) {
	if len(s) != 1 || s[0] < '0' || s[0] >= '0'+MaxClasses {
		return 0, false
	}
	return Class(s[0] - '0'), true
}

// ParseClass maps a class name, as received in ClassHeader or
// ClassMetadataKey, to a Class. It accepts, ignoring ASCII case and the
// optional whitespace around the value:
//
//   - "critical", "default", "sheddable": Critical, Default, Sheddable;
//   - the Google SRE criticality names: "critical_plus" → Critical,
//     "sheddable_plus" → Default (and "critical", "sheddable" as above);
//   - a single digit "0" to "7" (below MaxClasses), for services configured
//     with more than three classes;
//   - "class N" with one space and N a single digit below MaxClasses, which
//     is what Class.String returns for classes 3 and up, so a class read from
//     a request and forwarded downstream with SetClassHeader parses back to
//     itself.
//
// Anything else returns ok=false; the adapter then uses its default class.
// ParseClass does not allocate.
func ParseClass(s string) (Class, bool) {
	s = classTrimOWS(s)
	switch len(s) {
	case 1:
		return digitClass(s)
	case 7:
		if equalASCIIFold(s, "default") {
			return Default, true
		}
		if equalASCIIFold(s[:6], "class ") {
			return digitClass(s[6:])
		}
	case 8:
		if equalASCIIFold(s, "critical") {
			return Critical, true
		}
	case 9:
		if equalASCIIFold(s, "sheddable") {
			return Sheddable, true
		}
	case 13:
		if equalASCIIFold(s, "critical_plus") {
			return Critical, true
		}
	case 14:
		if equalASCIIFold(s, "sheddable_plus") {
			return Default, true
		}
	}
	return 0, false
}

// classKey is the context key under which WithClass stores a Class.
type classKey struct{}

// WithClass returns a copy of ctx carrying class c, which replaces any class
// ctx already carries. Adapters call it once per request, after reading the
// class from ClassHeader or metadata (or from route configuration).
func WithClass(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// ClassFrom returns the class ctx carries, and ok=false (with Critical, the
// zero Class) when it carries none. ClassFrom does not allocate.
func ClassFrom(ctx context.Context) (Class, bool) {
	c, ok := ctx.Value(classKey{}).(Class)
	return c, ok
}

// SetClassHeader writes the class ctx carries into h[ClassHeader] of an
// outgoing request, replacing any value there, so the callee sheds the
// request with the priority it had here; it returns true when it wrote one.
// A class at or above MaxClasses, which ParseClass would refuse, is written
// as MaxClasses−1 ("class 7"), the least important class a callee can
// configure, so forwarding never raises a request's priority. When ctx
// carries no class, h is left as it is and SetClassHeader returns false.
func SetClassHeader(h http.Header, ctx context.Context) bool {
	c, ok := ClassFrom(ctx)
	if !ok {
		return false
	}
	if c >= MaxClasses {
		c = MaxClasses - 1
	}
	h[ClassHeader] = []string{c.String()}
	return true
}
