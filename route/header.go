package route

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/spillwayhq/spillway/request"
)

// Kinds of header condition.
const (
	headerPresent = iota
	headerValue
	headerRegex
)

// headerMatcher is a compiled HeaderMatch; immutable.
type headerMatcher struct {
	name   string // lowercase
	kind   uint8
	value  string
	re     *regexp.Regexp // headerRegex: anchored
	invert bool
}

// compileHeader validates hm. The error's Field is relative to hm.
func compileHeader(hm HeaderMatch) (headerMatcher, *MatchError) {
	h := headerMatcher{name: strings.ToLower(hm.Name), invert: hm.Invert}
	if hm.Name == "" {
		return h, &MatchError{Field: "Name", Reason: "empty header name"}
	}
	for i := 0; i < len(hm.Name); i++ {
		if !isTokenChar(hm.Name[i]) {
			return h, &MatchError{Field: "Name", Reason: strconv.Quote(hm.Name) + ": character " + strconv.QuoteRune(rune(hm.Name[i])) + " is not allowed in a header name"}
		}
	}
	set := 0
	if hm.Value != "" {
		set++
		h.kind, h.value = headerValue, hm.Value
	}
	if hm.Regex != "" {
		set++
		re, reason := anchored(hm.Regex)
		if reason != "" {
			return h, &MatchError{Field: "Regex", Reason: reason}
		}
		h.kind, h.re = headerRegex, re
	}
	if hm.Present {
		set++
		h.kind = headerPresent
	}
	if set != 1 {
		return h, &MatchError{Field: "Value", Reason: "exactly one of Value, Regex and Present must be set for header " + strconv.Quote(hm.Name)}
	}
	return h, nil
}

// holds reports whether the condition holds for the fields of hdr (nil: no
// fields).
func (h *headerMatcher) holds(hdr request.Header) bool {
	return h.found(hdr) != h.invert
}

// found reports the condition before inversion.
func (h *headerMatcher) found(hdr request.Header) bool {
	if hdr == nil {
		return false
	}
	first, ok := hdr.Get(h.name)
	if !ok {
		return false
	}
	if h.kind == headerPresent || h.accepts(first) {
		return true
	}
	// The first field does not match; look at all of them (the first
	// again). The scanner is pooled so that the callback, which escapes
	// through the interface, is not allocated per call.
	s := scanners.Get().(*scanner)
	s.h, s.hit = h, false
	hdr.Values(h.name, s.fn)
	hit := s.hit
	s.h = nil
	scanners.Put(s)
	return hit
}

// accepts reports whether one field value satisfies a Value or Regex
// condition.
func (h *headerMatcher) accepts(v string) bool {
	if h.kind == headerValue {
		return v == h.value
	}
	return h.re.MatchString(v)
}

// scanner carries one Values walk's state; fn is its visit method, bound
// once when the scanner is made.
type scanner struct {
	h   *headerMatcher
	hit bool
	fn  func(string) bool
}

func (s *scanner) visit(v string) bool {
	if s.h.accepts(v) {
		s.hit = true
		return false
	}
	return true
}

// scanners holds idle scanners; a pool, so it holds at most about one per
// P between collections.
var scanners = sync.Pool{New: func() any {
	s := new(scanner)
	s.fn = s.visit
	return s
}}
