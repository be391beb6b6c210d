package loadgen

import (
	"crypto/tls"
	"net/http"
	"time"
)

// Target is one kind of request. URL, header values and Body may hold
// {{name}} variables (Config.Vars), filled per request.
type Target struct {
	Method string // default GET
	URL    string
	Header http.Header
	Body   []byte
	Weight float64 // share among targets; 0 means 1
}

// Class is one criticality class of the request mix: its Share of the
// arrivals carry ClassHeader: Name.
type Class struct {
	Name  string
	Share float64
}

// RetryMode is the client's retry policy.
type RetryMode int

const (
	RetryNone      RetryMode = iota // one attempt
	RetryImmediate                  // up to Retries more attempts, at once
	RetryBackoff                    // up to Retries more, after full-jitter exponential backoff
	RetryBudget                     // as RetryBackoff, paid from a retry budget (retry.Budget)
)

// ClientPolicy is how the simulated clients behave, built on the library's
// client.Transport. Retries apply to every method, POST included (a load
// generator knows what it sends), to transport errors, attempt timeouts
// and the answers client.DefaultRetryable retries (502, 503, 504, and 429
// with Retry-After); a retry never comes earlier than Retry-After asks.
type ClientPolicy struct {
	Retry       RetryMode
	Retries     int           // extra attempts at most; default 3 when Retry is not RetryNone
	BackoffBase time.Duration // default 50ms
	BackoffCap  time.Duration // default 1s
	BudgetRatio float64       // RetryBudget: retries per call at most; default 0.1
	BudgetMin   float64       // RetryBudget: retries per second always allowed; default 0
}

// Abort stops a run early: when, over a window of For, the error rate
// exceeded ErrorRate (0: never) or the p99 exceeded P99 (0: never).
type Abort struct {
	ErrorRate float64
	P99       time.Duration
	For       time.Duration // default 5s
}

// Config describes a run.
type Config struct {
	Targets  []Target // at least one
	Steps    []Step   // at least one
	Arrivals Arrivals

	Classes     []Class // empty: no class header
	ClassHeader string  // default "Spillway-Criticality"
	// Vars gives each {{name}} a value in 0 … N−1, drawn uniformly per
	// request from the seeded generator ({{seq}} is always the arrival's
	// sequence number).
	Vars map[string]int

	// Timeout is the client's timeout for one attempt: an attempt not
	// answered within it fails (and may be retried, as the seed's clients
	// do). A call is good when it ends 2xx within Timeout of its intended
	// send (first attempt) or of its successful retry's send. Default 1s.
	// Each attempt carries its remaining time as its deadline
	// (Spillway-Timeout), at most what is left of the call's Deadline.
	Timeout time.Duration
	// Deadline bounds the whole call, retries included, from its intended
	// send. Default Timeout × (1 + Retries), plus Retries × BackoffCap
	// for RetryBackoff and RetryBudget. At least Timeout.
	Deadline time.Duration
	// MaxInFlight bounds the calls in flight; an arrival that finds it full
	// is unsent. Default 10000.
	MaxInFlight int
	// MaxSendLag marks a step invalid when its send lag p99 is above it.
	// Default 5ms.
	MaxSendLag time.Duration

	Client ClientPolicy
	Abort  Abort

	// Transport sends the attempts; nil: one built for HTTP2 and TLS, with
	// enough idle connections per host for MaxInFlight.
	Transport http.RoundTripper
	HTTP2     bool        // HTTP/2 (ALPN over TLS; prior knowledge on http:// URLs)
	TLS       *tls.Config // for https:// targets; nil: defaults

	// Seed seeds arrivals, target, class and variable draws.
	Seed uint64

	// Progress, when set, is called about once a second from one goroutine.
	Progress func(Progress)
	// StepDone, when set, is called as each step's result is complete.
	StepDone func(StepResult)
}

// Result is what a run did.
type Result struct {
	Steps   []StepResult
	Aborted string // why the run stopped early; "" if it did not
	// TailAttempts counts the attempts sent after the last step's end
	// (retries of its calls), which are in no step's Attempts.
	TailAttempts int
}
