package admit

import (
	"net/http"
	"strconv"

	"github.com/spillwayhq/spillway/limit"
)

// Canonical header keys and pre-built values, assigned into the response
// header map as they are (no per-refusal allocation of slices).
const (
	hdrContentType  = "Content-Type"
	hdrRetryAfter   = "Retry-After"
	hdrCacheControl = "Cache-Control"
	hdrNoSniff      = "X-Content-Type-Options"
)

var (
	valProblem = []string{"application/problem+json"}
	valNoStore = []string{"no-store"}
	valNoSniff = []string{"nosniff"}
)

// response is one pre-built refusal: status and body, per reason.
type response struct {
	status int
	body   []byte
	retry  bool // carries Retry-After
}

// maxRetryValues bounds the pre-built Retry-After values: a jitter span
// beyond it is formatted per refusal (one small allocation).
const maxRetryValues = 64

// retryValues[i] is the Retry-After value for RetryAfter + i seconds.
type retryValues [][]string

func (g *Gate) buildResponses() {
	base := g.cfg.ProblemBase
	typ := func(name string) string {
		if base == "" {
			return "about:blank"
		}
		return base + name
	}
	for r := limit.Reason(1); int(r) < limit.NumReasons; r++ {
		status, name, title := http.StatusServiceUnavailable, "overloaded", "Service Unavailable"
		switch r {
		case limit.ReasonFairness:
			status, name, title = http.StatusTooManyRequests, "fair-share", "Too Many Requests"
		case limit.ReasonDeadline, limit.ReasonCancelled:
			name = "deadline"
		}
		g.resp[r] = response{
			status: status,
			retry:  r != limit.ReasonDeadline && r != limit.ReasonCancelled,
			body:   problemBody(typ(name), title, status, r.Detail(), r.String()),
		}
	}
	g.retryVals = make(retryValues, min(g.retrySpan, maxRetryValues-1)+1)
	for i := range g.retryVals {
		g.retryVals[i] = []string{strconv.Itoa(g.retryMin + i)}
	}
	g.badHeaderType = typ("bad-header")
}

// problemBody renders an RFC 9457 problem+json object.
func problemBody(typ, title string, status int, detail, reason string) []byte {
	b := []byte(`{"type":`)
	b = strconv.AppendQuote(b, typ)
	b = append(b, `,"title":`...)
	b = strconv.AppendQuote(b, title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":`...)
	b = strconv.AppendQuote(b, detail)
	b = append(b, `,"reason":`...)
	b = strconv.AppendQuote(b, reason)
	return append(b, "}\n"...)
}

// retryAfter returns a pre-built Retry-After value drawn from
// [RetryAfter, RetryAfter + RetryJitter].
func (g *Gate) retryAfter() []string {
	s := g.RetryAfterSeconds()
	if i := s - g.retryMin; i < len(g.retryVals) {
		return g.retryVals[i]
	}
	return []string{strconv.Itoa(s)}
}

// writeRefusal answers a refused request with its pre-built response.
func (g *Gate) writeRefusal(w http.ResponseWriter, why limit.Reason) {
	resp := &g.resp[why]
	h := w.Header()
	h[hdrContentType] = valProblem
	h[hdrCacheControl] = valNoStore
	h[hdrNoSniff] = valNoSniff
	if resp.retry {
		h[hdrRetryAfter] = g.retryAfter()
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

// writeBadHeader answers 400 naming the malformed header and why.
func (g *Gate) writeBadHeader(w http.ResponseWriter, reason string) {
	h := w.Header()
	h[hdrContentType] = valProblem
	h[hdrCacheControl] = valNoStore
	h[hdrNoSniff] = valNoSniff
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(problemBody(g.badHeaderType, "Bad Request", http.StatusBadRequest, reason, "bad_header"))
}
