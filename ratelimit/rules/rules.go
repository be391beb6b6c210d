package rules

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/spillwayhq/spillway/ratelimit"
)

// ErrInvalid is wrapped by every error of this package: a rules file or a
// Set that cannot be enforced.
var ErrInvalid = errors.New("rules: invalid rules")

// Limits on a rules file, so that a hostile or broken file cannot make the
// loader (or a limiter built from it) use unbounded memory or time.
const (
	MaxFileBytes    = 1 << 20 // a larger file is refused unread
	MaxRules        = 1000    // rules per file
	MaxKeyParts     = 8       // parts per key
	MaxMatchEntries = 64      // methods, and paths, per rule
	MaxIDLength     = 64      // bytes in a rule id or identity name
	MaxErrors       = 20      // errors reported per file; more are counted
)

// OnMissing is what a rule does with a request that lacks one of its key
// parts (no X-User-ID header, no route).
type OnMissing uint8

const (
	// MissingSkip does not apply the rule to the request. The default.
	MissingSkip OnMissing = iota
	// MissingFallback counts every such request under one shared key,
	// FallbackKey: anonymous callers share one budget.
	MissingFallback
)

// String returns "skip" or "fallback", the file's spelling.
func (o OnMissing) String() string {
	if o == MissingFallback {
		return "fallback"
	}
	return "skip"
}

// FallbackKey is the key under which a MissingFallback rule counts requests
// that lack a key part. It holds a NUL byte, which no HTTP header value can
// contain, so no client can name it.
const FallbackKey = "\x00fallback"

// GlobalKey is the key of a rule whose Key is empty: every matching request
// counts against one budget (for example the whole of POST /export).
const GlobalKey = "\x00global"

// Set is a rules file: the rules, the named identities their keys use, and
// how the client IP is found. The zero value is an empty set (no rules, no
// trusted proxies); Parse and Load return a validated Set.
type Set struct {
	// Rules are checked in order; every rule that matches a request is
	// applied. Ids are unique.
	Rules []Rule
	// Identities maps a key part name ("user", "apikey") to where its value
	// comes from, adding to or replacing DefaultIdentities. Rule keys hold
	// the resolved source (KeyPart.Header), so this map only documents the
	// file; Validate checks its entries.
	Identities map[string]Identity
	// TrustedProxies are the networks whose X-Forwarded-For or Forwarded
	// header is believed. Empty: no proxy is trusted and the client IP is
	// always the connection's peer address.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the one header read from trusted proxies:
	// "X-Forwarded-For" (the default when empty) or "Forwarded" (RFC 7239).
	// Only one is read, because a proxy that maintains one of them passes
	// the other through from the client unchanged, where it could be
	// forged.
	ForwardedHeader string
	// IPv6Prefix is how many leading bits of an IPv6 client address form
	// the "ip" key part (0 means 64): a single host usually owns a whole
	// /64 and can change addresses within it at will. 128 keys each
	// address on its own. IPv4 addresses are always used whole.
	IPv6Prefix int
}

// Rule is one limit: which requests it applies to (Match), how they are
// grouped into keys (Key), and how much each key may do (Spec, Cost).
type Rule struct {
	// ID names the rule in responses, headers, metrics and logs: 1 to
	// MaxIDLength bytes of letters, digits, '.', '_', ':' and '-'.
	ID string
	// Key lists the parts whose values, joined, form the key; every
	// distinct key has its own budget. Empty: one budget for all matching
	// requests (GlobalKey).
	Key []KeyPart
	// Spec is the limit per key: Rate units per Per seconds, Burst, and the
	// algorithm.
	Spec ratelimit.Spec
	// Cost is the units one request takes; 0 means 1. It must not exceed
	// the limit's capacity (Burst, or Rate for window algorithms), or no
	// request could ever pass.
	Cost int
	// Shadow makes the rule count and log the requests it would refuse
	// without refusing (or delaying) any: for trying a new rule safely.
	Shadow bool
	// FailMode is what happens when the rule's store cannot decide:
	// ratelimit.FailOpen (serve; the default) or ratelimit.FailClosed
	// (refuse with 503; for OTP, login, payments).
	FailMode ratelimit.FailMode
	// OnMissing is what happens to a request lacking a key part.
	OnMissing OnMissing
	// Match selects the requests the rule applies to; the zero Match
	// selects every request.
	Match Match
}

// Identity is where a named key part's value comes from.
type Identity struct {
	// Header is the request header holding the value, in canonical form
	// (see net/textproto.CanonicalMIMEHeaderKey).
	Header string
}

// DefaultIdentities are the named key parts that need no identities:
// section. A file's identities: section may redefine any of them.
//
//	user    X-User-Id
//	tenant  X-Tenant-Id
//	phone   X-Phone
//	apikey  X-Api-Key
//
// Header values are whatever the client sends: put the limiter behind the
// authentication that sets or verifies them (or use httplimit's Identity
// hook), or a client can pick a fresh user per request.
func DefaultIdentities() map[string]Identity {
	return map[string]Identity{
		"user":   {Header: "X-User-Id"},
		"tenant": {Header: "X-Tenant-Id"},
		"phone":  {Header: "X-Phone"},
		"apikey": {Header: "X-Api-Key"},
	}
}

// Header names of the two forwarding headers a Set may trust.
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded"
)

// Capacity is the most units one request of the rule can ever take: Burst
// for the bucket algorithms (⌈Rate⌉ when Burst is 0), Rate for the window
// algorithms.
func (r *Rule) Capacity() int {
	alg := r.Spec.Algorithm
	if alg == 0 {
		alg = ratelimit.AlgGCRA
	}
	if alg.Bucket() && r.Spec.Burst == 0 {
		return int(math.Min(math.Ceil(r.Spec.Rate), ratelimit.MaxBurst))
	}
	if alg.Bucket() {
		return r.Spec.Burst
	}
	return int(math.Min(r.Spec.Rate, ratelimit.MaxBurst))
}

// RequestCost is the units a request takes: Cost, or 1 when Cost is 0.
func (r *Rule) RequestCost() int {
	if r.Cost <= 0 {
		return 1
	}
	return r.Cost
}

// FieldError is a problem with one field of a rule or set. Field is the
// field's name as a rules file spells it ("burst", "match.paths[1]",
// "key[0]"), so that the loader can point at its line.
type FieldError struct {
	Rule  string // the rule's id, or "" for a set-level field
	Field string
	Msg   string
}

// Error returns `rules: rule "id": field: reason`.
func (e *FieldError) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("rules: rule %q: %s: %s", e.Rule, e.Field, e.Msg)
	}
	return fmt.Sprintf("rules: %s: %s", e.Field, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(rule, field, format string, args ...any) *FieldError {
	return &FieldError{Rule: rule, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first problem with r as a *FieldError, or nil.
func (r *Rule) Validate() error {
	if err := validID(r.ID); err != "" {
		return fieldErr(r.ID, "id", "%s", err)
	}
	if len(r.Key) > MaxKeyParts {
		return fieldErr(r.ID, "key", "at most %d parts, got %d", MaxKeyParts, len(r.Key))
	}
	for i, p := range r.Key {
		if err := p.validate(); err != "" {
			return fieldErr(r.ID, fmt.Sprintf("key[%d]", i), "%s", err)
		}
		for _, q := range r.Key[:i] {
			if q.Name == p.Name {
				return fieldErr(r.ID, fmt.Sprintf("key[%d]", i), "part %q is listed twice", p.Name)
			}
		}
	}
	if err := r.validateSpec(); err != nil {
		return err
	}
	if r.Cost < 0 {
		return fieldErr(r.ID, "cost", "must be at least 1 unit (0 means 1), got %d", r.Cost)
	}
	if c, max := r.RequestCost(), r.Capacity(); c > max {
		return fieldErr(r.ID, "cost", "%d units is more than the rule ever allows at once (%d), so every request would be refused", c, max)
	}
	if r.FailMode > ratelimit.FailClosed {
		return fieldErr(r.ID, "failMode", "unknown fail mode %d", r.FailMode)
	}
	if r.OnMissing > MissingFallback {
		return fieldErr(r.ID, "onMissing", "unknown value %d", r.OnMissing)
	}
	return r.Match.validate(r.ID)
}

// validateSpec checks the limit, naming the file's field for each problem,
// then leaves the rest to ratelimit.Spec.Validate.
func (r *Rule) validateSpec() error {
	s := r.Spec
	alg := s.Algorithm
	if alg == 0 {
		alg = ratelimit.AlgGCRA
	}
	switch {
	case alg < ratelimit.AlgTokenBucket || alg > ratelimit.AlgGCRA:
		return fieldErr(r.ID, "algorithm", "unknown algorithm %d", int(s.Algorithm))
	case !(s.Rate > 0) || math.IsInf(s.Rate, 1):
		return fieldErr(r.ID, "rate", "must be a positive finite number of units per period, got %v", s.Rate)
	case !(s.Per > 0) || math.IsInf(s.Per, 1):
		return fieldErr(r.ID, "per", "must be a positive duration, got %v seconds", s.Per)
	case s.Burst < 0 || s.Burst > ratelimit.MaxBurst:
		return fieldErr(r.ID, "burst", "must be from 0 (meaning ⌈rate⌉) to %d, got %d", int64(ratelimit.MaxBurst), s.Burst)
	case alg.Bucket() && s.Burst == 0 && s.Rate > ratelimit.MaxBurst:
		return fieldErr(r.ID, "burst", "must be set when rate exceeds %d", int64(ratelimit.MaxBurst))
	case !alg.Bucket() && s.Burst != 0:
		return fieldErr(r.ID, "burst", "must be omitted for the %s algorithm (it allows rate units per window), got %d", alg.Name(), s.Burst)
	case !alg.Bucket() && s.Rate != math.Trunc(s.Rate):
		return fieldErr(r.ID, "rate", "must be a whole number for the %s algorithm, got %v", alg.Name(), s.Rate)
	}
	if err := s.Validate(); err != nil {
		field := "rate"
		if strings.Contains(err.Error(), "Burst") {
			field = "burst"
		}
		return fieldErr(r.ID, field, "%s", strings.TrimPrefix(err.Error(), ratelimit.ErrInvalidLimit.Error()+": "))
	}
	return nil
}

// validID returns why id cannot be a rule id or identity name, or "".
func validID(id string) string {
	if id == "" {
		return "must not be empty"
	}
	if len(id) > MaxIDLength {
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxIDLength, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Sprintf("%q may hold only letters, digits, '.', '_', ':' and '-'", id)
		}
	}
	return ""
}

// Validate reports the first problem with s as an error wrapping ErrInvalid
// (a *FieldError naming the rule and field), or nil.
func (s *Set) Validate() error {
	if len(s.Rules) > MaxRules {
		return fieldErr("", "rules", "at most %d rules, got %d", MaxRules, len(s.Rules))
	}
	seen := make(map[string]bool, len(s.Rules))
	for i := range s.Rules {
		r := &s.Rules[i]
		if err := r.Validate(); err != nil {
			return err
		}
		if seen[r.ID] {
			return fieldErr(r.ID, "id", "duplicate rule id %q", r.ID)
		}
		seen[r.ID] = true
	}
	for name, id := range s.Identities {
		if err := validIdentity(name, id); err != "" {
			return fieldErr("", "identities."+name, "%s", err)
		}
	}
	for i, p := range s.TrustedProxies {
		if !p.IsValid() {
			return fieldErr("", fmt.Sprintf("trustedProxies[%d]", i), "invalid prefix")
		}
	}
	switch s.ForwardedHeader {
	case "", HeaderXForwardedFor, HeaderForwarded:
	default:
		return fieldErr("", "forwardedHeader", "must be %q or %q, got %q", HeaderXForwardedFor, HeaderForwarded, s.ForwardedHeader)
	}
	if s.IPv6Prefix < 0 || s.IPv6Prefix > 128 {
		return fieldErr("", "ipv6Prefix", "must be from 1 to 128 bits (0 means 64), got %d", s.IPv6Prefix)
	}
	return nil
}

func validIdentity(name string, id Identity) string {
	if err := validID(name); err != "" {
		return err
	}
	if _, builtin := builtinParts[name]; builtin {
		return fmt.Sprintf("%q is a built-in key part and cannot be redefined", name)
	}
	if !validHeaderName(id.Header) {
		return fmt.Sprintf("header %q is not a valid header name", id.Header)
	}
	if id.Header != textproto.CanonicalMIMEHeaderKey(id.Header) {
		return fmt.Sprintf("header %q is not in canonical form (%q)", id.Header, textproto.CanonicalMIMEHeaderKey(id.Header))
	}
	return ""
}

// ForwardedHeaderName returns the header read from trusted proxies.
func (s *Set) ForwardedHeaderName() string {
	if s.ForwardedHeader == "" {
		return HeaderXForwardedFor
	}
	return s.ForwardedHeader
}

// IPv6Bits returns the IPv6 prefix length of the "ip" key part.
func (s *Set) IPv6Bits() int {
	if s.IPv6Prefix == 0 {
		return 64
	}
	return s.IPv6Prefix
}
