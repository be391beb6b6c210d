package admit

import (
	"context"
	"errors"
	"hash/maphash"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// HTTPOptions adapts the HTTP middleware to a service. The zero value is
// fine: every request costs 1, has no client identity (no fairness) and is
// classed by its header or the Gate's default class.
type HTTPOptions struct {
	// Classify, if set, names the class of a request from its route (or
	// anything else); ok=false falls back to the header (unless the Gate
	// ignores it) and then to the Gate's DefaultClass.
	Classify func(r *http.Request) (c shed.Class, ok bool)
	// Cost, if set, returns the places a request takes (< 1 counts as 1).
	Cost func(r *http.Request) int
	// Client, if set, returns a request's client identity for fairness: a
	// non-zero hash (ClientAddr hashes the peer address). 0 opts out.
	Client func(r *http.Request) uint64
	// Outcome, if set, maps how the handler ended to the Limiter's
	// outcome; nil means DefaultHTTPOutcome.
	Outcome func(status int, ctxErr error) limit.Outcome
}

// DefaultHTTPOutcome maps a finished request to the outcome fed to the
// Limiter: the caller went away (context.Canceled) → Ignore; the request's
// deadline passed while it was served, or the handler answered 503 or 504
// (itself overloaded, or timed out downstream) → Dropped; anything else,
// errors included (a 500 is a bug, not a sign of overload) → Success.
func DefaultHTTPOutcome(status int, ctxErr error) limit.Outcome {
	switch {
	case errors.Is(ctxErr, context.Canceled):
		return limit.Ignore
	case errors.Is(ctxErr, context.DeadlineExceeded),
		status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return limit.Dropped
	}
	return limit.Success
}

// Handler returns next behind the Gate. Per request it:
//
//  1. reads the class — HTTPOptions.Classify, else the Spillway-Criticality
//     header (shed.ClassHeader) unless the Gate ignores it, else the
//     Gate's DefaultClass — and the caller's budget, the Spillway-Timeout
//     header (deadline.HTTPHeader, grpc-timeout syntax), combined with any
//     deadline the request's context already has. A malformed header is
//     answered 400 with the reason, or ignored with LenientHeaders;
//  2. asks the Limiter for a place (Gate.Enter): a request whose deadline
//     has passed or cannot be met given the current queue wait is refused
//     before any work; a request finding the limit full waits in the
//     Limiter's queue if it has one, else is refused;
//  3. refuses with a pre-built answer — 503 (overloaded: limit, queue full,
//     expired, CoDel, deadline) or 429 (the client holds its fair share)
//     with Retry-After, Cache-Control: no-store and an RFC 9457
//     problem+json body naming the reason;
//  4. or serves the request with a context carrying its class
//     (shed.ClassFrom; forward it with shed.SetClassHeader), its deadline
//     (forward the remaining budget with deadline.SetHeader) and the
//     brownout decision (brownout.OptionalFrom), then reports the outcome
//     (HTTPOptions.Outcome) to the Limiter and the Dimmer.
//
// The refusal path allocates nothing of its own beyond what setting three
// response headers costs.
func (g *Gate) Handler(next http.Handler, opts HTTPOptions) http.Handler {
	outcome := opts.Outcome
	if outcome == nil {
		outcome = DefaultHTTPOutcome
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class, ok := shed.Class(0), false
		if opts.Classify != nil {
			class, ok = opts.Classify(r)
		}
		if !ok && !g.cfg.IgnoreClassHeader {
			if v, present := headerValue(r.Header, shed.ClassHeader); present {
				if class, ok = shed.ParseClass(v); !ok && !g.cfg.LenientHeaders {
					g.writeBadHeader(w, shed.ClassHeader+": unknown class "+strconv.Quote(v))
					return
				}
			}
		}
		if !ok {
			class = g.defaultClass
		}
		var budget time.Duration
		hasBudget := false
		if !g.cfg.IgnoreDeadlineHeader {
			d, present, err := deadline.FromHeader(r.Header)
			switch {
			case err != nil && !g.cfg.LenientHeaders:
				g.writeBadHeader(w, err.Error())
				return
			case err == nil && present:
				budget, hasBudget = d, true
			}
		}

		ctx := r.Context()
		now := g.clk.Now()
		req := limit.Request{Class: class}
		if opts.Cost != nil {
			req.Cost = opts.Cost(r)
		}
		if opts.Client != nil {
			req.Client = opts.Client(r)
		}
		if at, ok := g.Deadline(ctx, now); ok {
			req.Deadline = at
		}
		if hasBudget {
			at := now + budget.Seconds()
			if req.Deadline == 0 || at < req.Deadline {
				req.Deadline = at
			}
			if at <= now { // a spent budget: 0 would read as "no deadline"
				req.Deadline = now
			}
		}

		var slot limit.Ticket
		t, wait, why := g.Enter(ctx, now, req, &slot)
		if why != limit.Admitted {
			g.writeRefusal(w, why)
			return
		}

		ctx = shed.WithClass(ctx, t.Class())
		if hasBudget {
			var cancel context.CancelFunc
			ctx, cancel = deadline.WithBudget(ctx, time.Now(), budget-time.Duration(wait*float64(time.Second)))
			defer cancel()
		}
		if g.dimmer != nil {
			ctx = brownout.WithOptional(ctx, g.Optional(now+wait))
		}
		rec := getRecorder(w)
		status := http.StatusOK
		o := limit.Ignore
		defer func() {
			// A panicking handler: its place is released (Ignore), the panic
			// goes on to net/http.
			g.Exit(t, now, wait, o)
			putRecorder(rec)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
		if rec.status != 0 {
			status = rec.status
		}
		o = outcome(status, ctx.Err())
	})
}

var clientSeed = maphash.MakeSeed()

// ClientAddr is an HTTPOptions.Client that identifies a client by the host
// of its connection's address (r.RemoteAddr, without the port), hashed with
// a per-process seed. Behind a proxy every request comes from the proxy's
// address: identify clients by an API key or a trusted forwarded address
// instead.
func ClientAddr(r *http.Request) uint64 {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return 0
	}
	return maphash.String(clientSeed, host) | 1 // never 0, the "unknown" key
}

// headerValue returns the first value of the canonical key k.
func headerValue(h http.Header, k string) (string, bool) {
	v := h[k]
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// recorder remembers the status a handler wrote. It unwraps to the
// original writer, so http.ResponseController reaches Flush, Hijack,
// deadlines and full duplex.
type recorder struct {
	http.ResponseWriter
	status int
}

var recorders = sync.Pool{New: func() any { return new(recorder) }}

func getRecorder(w http.ResponseWriter) *recorder {
	rec := recorders.Get().(*recorder)
	rec.ResponseWriter, rec.status = w, 0
	return rec
}

func putRecorder(rec *recorder) {
	rec.ResponseWriter = nil
	recorders.Put(rec)
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.ResponseWriter.Write(b)
}

// Flush passes through, for handlers that stream without a
// ResponseController.
func (rec *recorder) Flush() {
	if f, ok := rec.ResponseWriter.(http.Flusher); ok {
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }
