package chain

import (
	"net/http"
	"strconv"
)

// Refusal is one pre-built answer the gateway gives instead of forwarding
// a request, built once per generation. What varies per request (the
// Retry-After seconds, a rate limit's RateLimit fields) is in the Pass.
type Refusal struct {
	// Status is the HTTP status of the answer.
	Status int
	// Reason is the verdict's reason code.
	Reason string
	// Body is the answer's body; ContentType its type ("" means
	// application/problem+json, with the problem fields that go with it).
	Body        []byte
	ContentType string
	// Fields are more fields of the answer, fixed (a static fallback's).
	Fields []Field
	// Retry says that the answer carries Retry-After (the Pass's seconds).
	Retry bool
	// GRPC is the answer on a gRPC route: a trailers-only response whose
	// grpc-status is this code (RESOURCE_EXHAUSTED, UNAVAILABLE or
	// DEADLINE_EXCEEDED) and whose grpc-message is GRPCMessage, with
	// grpc-retry-pushback-ms from the Retry-After when Retry is set.
	GRPC        int
	GRPCMessage string
}

// Field is one header field of an answer.
type Field struct{ Name, Value string }

// gRPC status codes used by refusals (google.golang.org/grpc/codes).
const (
	GRPCDeadlineExceeded  = 4
	GRPCResourceExhausted = 8
	GRPCUnavailable       = 14
)

// NewRefusal builds a problem+json refusal (RFC 9457) with status, reason
// code and detail (a short sentence safe to show a client); retry says
// whether it carries Retry-After. The gRPC code follows the status: 429
// is RESOURCE_EXHAUSTED (the caller is over its own limit), a refusal for
// time DEADLINE_EXCEEDED, any other UNAVAILABLE.
func NewRefusal(status int, reason, detail string, retry bool) *Refusal {
	code := GRPCUnavailable
	switch {
	case status == http.StatusTooManyRequests:
		code = GRPCResourceExhausted
	case reason == ReasonDeadline:
		code = GRPCDeadlineExceeded
	}
	return &Refusal{
		Status: status, Reason: reason, Body: ProblemBody(status, reason, detail),
		Retry: retry, GRPC: code, GRPCMessage: grpcMessage(reason + ": " + detail),
	}
}

// ProblemBody renders an RFC 9457 problem+json document with the reason
// code as an extension member.
func ProblemBody(status int, reason, detail string) []byte {
	b := []byte(`{"type":"about:blank","title":`)
	b = strconv.AppendQuote(b, http.StatusText(status))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":`...)
	b = strconv.AppendQuote(b, detail)
	b = append(b, `,"reason":`...)
	b = strconv.AppendQuote(b, reason)
	return append(b, "}\n"...)
}

// grpcMessage keeps what a grpc-message field may carry unencoded:
// printable ASCII other than '%' (the percent-encoding gRPC uses would be
// needed for the rest).
func grpcMessage(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f && c != '%' {
			b = append(b, c)
		}
	}
	return string(b)
}

// Reason codes of the chain's own verdicts (rate-limit reasons carry the
// rule: "ratelimit:<id>", built by ratelimit/httplimit).
const (
	ReasonDeadline      = "deadline"
	ReasonAdmitLimit    = "admit:limit"
	ReasonAdmitQueue    = "admit:queue"
	ReasonAdmitCoDel    = "admit:codel"
	ReasonAdmitFairness = "admit:fairness"
	ReasonBulkhead      = "bulkhead"
	ReasonBreakerOpen   = "breaker-open"
	ReasonFallback      = "breaker-fallback"
	ReasonBadHeader     = "bad-header"
)
