package httplimit

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// Header names in canonical form, so that the header map is written
// without canonicalising (which would allocate for "RateLimit-Policy").
const (
	hdrPolicy       = "Ratelimit-Policy"
	hdrRateLimit    = "Ratelimit"
	hdrRetryAfter   = "Retry-After"
	hdrContentType  = "Content-Type"
	hdrCacheControl = "Cache-Control"
	problemJSON     = "application/problem+json"
	noStore         = "no-store"
)

// maxRetryAfter caps the Retry-After seconds (a year), so that a huge
// RetryAfter never overflows.
const maxRetryAfter = 365 * 86400

// headerBlock holds a response's rate-limit header values in one
// allocation: the string slices stored in the header map and the bytes of
// the formatted values point into it. It is never modified after the
// values are published.
type headerBlock struct {
	vals [5]string
	buf  [128]byte
}

// policyField returns the RateLimit-Policy item for a rule (IETF
// draft-ietf-httpapi-ratelimit-headers): `"id";q=Q;w=W`, Q units per W whole
// seconds as ratelimit.Spec.Policy maps the rule (Q at least the rule's
// capacity, Q/W never above its rate), or `"id";q=Q` when no window of at
// most 15 digits fits.
func policyField(r *rules.Rule) string {
	q, w := r.Spec.Policy()
	f := strconv.Quote(r.ID) + ";q=" + strconv.FormatInt(q, 10)
	if w > 0 {
		f += ";w=" + strconv.FormatInt(w, 10)
	}
	return f
}

// ceilSeconds is ⌈x⌉ as a whole number of seconds, at least 0 and at most
// maxRetryAfter.
func ceilSeconds(x float64) int64 {
	if !(x > 0) {
		return 0
	}
	if x >= maxRetryAfter {
		return maxRetryAfter
	}
	return int64(math.Ceil(x))
}

// appendLimit appends the RateLimit field of rule ru: remaining units
// (at most the rule's capacity, whatever a store reports, so that r ≤ q)
// and t seconds to reset.
func appendLimit(b []byte, ru *rule, remaining int, t int64) []byte {
	b = append(b, ru.quotedID...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(min(max(remaining, 0), ru.Capacity())), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, t, 10)
}

// setLimitHeaders writes v's RateLimit-Policy and RateLimit fields and,
// when v.RetryAfter ≥ 0 (a 429), Retry-After, Content-Type and
// Cache-Control: all in one allocation. v must have the fields (v.Limit
// not nil).
func setLimitHeaders(h http.Header, v *Verdict) {
	hb := new(headerBlock)
	hb.vals[0] = v.ru.policy
	b := append(hb.buf[:0], v.Limit...)
	n := len(b)
	if v.RetryAfter >= 0 {
		b = strconv.AppendInt(b, v.RetryAfter, 10)
	}
	if len(b) > len(hb.buf) { // cannot happen: ids are short; stay correct anyway
		hb.vals[1] = string(b[:n])
		hb.vals[2] = string(b[n:])
	} else {
		hb.vals[1] = unsafe.String(&hb.buf[0], n)
		if v.RetryAfter >= 0 {
			hb.vals[2] = unsafe.String(&hb.buf[n], len(b)-n)
		}
	}
	h[hdrPolicy] = hb.vals[0:1:1]
	h[hdrRateLimit] = hb.vals[1:2:2]
	if v.RetryAfter >= 0 {
		hb.vals[3], hb.vals[4] = problemJSON, noStore
		h[hdrRetryAfter] = hb.vals[2:3:3]
		h[hdrContentType] = hb.vals[3:4:4]
		h[hdrCacheControl] = hb.vals[4:5:5]
	}
}

// setErrorHeaders writes Content-Type, Cache-Control and, when retry ≥ 0,
// Retry-After, for a response without rate-limit fields.
func setErrorHeaders(h http.Header, retry int64) {
	hb := new(headerBlock)
	hb.vals[3], hb.vals[4] = problemJSON, noStore
	h[hdrContentType] = hb.vals[3:4:4]
	h[hdrCacheControl] = hb.vals[4:5:5]
	if retry >= 0 {
		b := strconv.AppendInt(hb.buf[:0], retry, 10)
		hb.vals[2] = unsafe.String(&hb.buf[0], len(b))
		h[hdrRetryAfter] = hb.vals[2:3:3]
	}
}

// problem is a pre-built RFC 9457 body with one number to fill in:
// head + seconds + (" second." or " seconds.") + tail; or, for a problem
// without a number, the whole body in fixed.
type problem struct {
	head, tail string
	fixed      []byte // the body of a problem without a number; shared, never modified
}

// newProblem builds the body of a problem whose detail ends with "Try
// again in about N seconds." (retry true) or has no number.
func newProblem(base, slug string, status int, rule, detail string, retry bool) problem {
	typ := "about:blank"
	if base != "" {
		typ = base + slug
	}
	q := func(s string) string {
		b, _ := json.Marshal(s) // strings always marshal
		return string(b)
	}
	head := `{"type":` + q(typ) + `,"title":` + q(http.StatusText(status)) + `,"status":` + strconv.Itoa(status) +
		`,"detail":` + strings.TrimSuffix(q(detail), `"`)
	tail := `","rule":` + q(rule) + "}\n"
	if !retry {
		return problem{head: head, tail: tail, fixed: []byte(head + tail)}
	}
	return problem{head: head + " Try again in about ", tail: tail}
}

// append appends the body with secs filled in.
func (p *problem) append(b []byte, secs int64) []byte {
	b = append(b, p.head...)
	b = strconv.AppendInt(b, secs, 10)
	if secs == 1 {
		b = append(b, " second."...)
	} else {
		b = append(b, " seconds."...)
	}
	return append(b, p.tail...)
}

// limitText describes a rule's limit for people: "10 requests per 15
// minutes", "3 units per 10 minutes" (when a request costs more than one).
func limitText(r *rules.Rule) string {
	unit := "requests"
	if r.RequestCost() != 1 {
		unit = "units"
	}
	rate := strconv.FormatFloat(r.Spec.Rate, 'f', -1, 64)
	if r.Spec.Rate == 1 {
		unit = strings.TrimSuffix(unit, "s")
	}
	return rate + " " + unit + " per " + perText(r.Spec.Per)
}

// perText is a period for people: "second", "minute", "15 minutes",
// "1.5 seconds".
func perText(sec float64) string {
	for _, u := range [...]struct {
		s    float64
		name string
	}{{86400, "day"}, {3600, "hour"}, {60, "minute"}, {1, "second"}} {
		n := sec / u.s
		if n == 1 {
			return u.name
		}
		if n > 1 && n == math.Trunc(n) {
			return strconv.FormatFloat(n, 'f', -1, 64) + " " + u.name + "s"
		}
	}
	return strconv.FormatFloat(sec, 'f', -1, 64) + " seconds"
}
