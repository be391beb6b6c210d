package admitgrpc

import (
	"context"
	"errors"
	"hash/maphash"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// PushbackKey is the trailer metadata key of the server's retry pushback
// (gRPC retry design A6): the number of milliseconds, as a decimal string,
// a client with a retry policy waits before retrying the refused call.
const PushbackKey = "grpc-retry-pushback-ms"

// Options adapt the interceptors to a service, as admit.HTTPOptions adapt
// the HTTP middleware. The zero value is fine: every call costs 1, has no
// client identity (no fairness) and is classed by its metadata or the
// Gate's default class. The functions are called once per call, from the
// goroutine serving it, and must be safe for concurrent use.
type Options struct {
	// Classify, if set, names the class of a call from its method
	// ("/package.Service/Method") or its context (route configuration);
	// ok=false falls back to the caller's metadata (unless the Gate ignores
	// it) and then to the Gate's DefaultClass.
	Classify func(ctx context.Context, fullMethod string) (c shed.Class, ok bool)
	// Cost, if set, returns the places a call takes (< 1 counts as 1). A
	// stream's cost is held for the whole stream.
	Cost func(ctx context.Context, fullMethod string) int
	// Client, if set, returns a call's client identity for fairness: a
	// non-zero hash (PeerClient hashes the peer's host). 0 opts out.
	Client func(ctx context.Context) uint64
	// Outcome, if set, maps how an admitted call ended to the Limiter's
	// outcome; nil means DefaultOutcome. It receives the handler's error,
	// or the call context's error (context.Canceled or
	// context.DeadlineExceeded) when the context ended before the handler
	// returned: the client then never sees the handler's answer.
	Outcome func(err error) limit.Outcome
}

// DefaultOutcome maps how an admitted call ended to the outcome fed to the
// Limiter:
//
//   - the caller went away (context.Canceled, or status code Canceled) →
//     Ignore: it says nothing about capacity;
//   - the call's deadline passed (context.DeadlineExceeded, or status code
//     DeadlineExceeded), or the handler answered ResourceExhausted or
//     Unavailable (itself overloaded, or refused downstream) → Dropped;
//   - anything else, nil and other errors included (NotFound, Internal: a
//     bug or a bad request, not a sign of overload) → Success.
//
// It does not allocate for nil, a context error or an unwrapped error made
// by package status.
func DefaultOutcome(err error) limit.Outcome {
	if err == nil {
		return limit.Success
	}
	switch {
	case errors.Is(err, context.Canceled):
		return limit.Ignore
	case errors.Is(err, context.DeadlineExceeded):
		return limit.Dropped
	}
	switch status.Code(err) {
	case codes.Canceled:
		return limit.Ignore
	case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable:
		return limit.Dropped
	}
	return limit.Success
}

// peerSeed seeds PeerClient's hash; drawn once per process, so client keys
// are not predictable from outside (a client cannot pick addresses that
// collide with another's slot on purpose).
var peerSeed = maphash.MakeSeed()

// PeerClient returns a fairness key for the call in ctx: a non-zero hash of
// its peer's host (peer.FromContext), the port left out so all connections
// from one host are one client; 0 when ctx carries no peer address. An IP
// address is hashed in its 16-byte form (an IPv4 address and its
// IPv4-mapped IPv6 form are one client); any other address (a Unix socket)
// by its text. Use it as Options.Client when clients connect directly;
// behind a proxy every call comes from the proxy's host, so key by what the
// proxy forwards instead. PeerClient does not allocate for TCP peers.
func PeerClient(ctx context.Context) uint64 {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return 0
	}
	var h uint64
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			return 0
		}
		b := ip.Unmap().As16()
		h = maphash.Bytes(peerSeed, b[:])
	} else {
		s := p.Addr.String()
		if ap, err := netip.ParseAddrPort(s); err == nil {
			b := ap.Addr().Unmap().As16()
			h = maphash.Bytes(peerSeed, b[:])
		} else {
			if host, _, err := net.SplitHostPort(s); err == nil {
				s = host
			}
			if s == "" {
				return 0
			}
			h = maphash.String(peerSeed, s)
		}
	}
	if h == 0 {
		h = 1 // 0 means "no client"
	}
	return h
}

// refusal is the pre-built answer to a call refused for one reason.
type refusal struct {
	err      error // a *status.Status error, shared by all refusals for the reason
	pushback bool  // whether the trailer carries PushbackKey
}

// pushbackSlots bounds the pushback trailer cache: one entry per slot.
const pushbackSlots = 64

// pushbackEntry is one cached pushback trailer; never written once
// published (grpc copies trailer metadata it is given, see
// metadata.Join), so concurrent refusals may share it.
type pushbackEntry struct {
	secs int
	md   metadata.MD
}

// interceptor holds what both interceptors share: the Gate, the options
// and the pre-built refusals. It is immutable after construction except
// for the pushback cache, which is made of atomic pointers.
type interceptor struct {
	g        *admit.Gate
	opts     Options
	outcome  func(error) limit.Outcome
	refusals [limit.NumReasons]refusal
	// pushback caches the trailer for a Retry-After of s seconds in slot
	// s mod pushbackSlots (direct-mapped: a draw that finds another value
	// there builds its own and replaces it).
	pushback [pushbackSlots]atomic.Pointer[pushbackEntry]
}

func newInterceptor(g *admit.Gate, opts Options) *interceptor {
	if g == nil {
		panic("admitgrpc: nil *admit.Gate")
	}
	ic := &interceptor{g: g, opts: opts, outcome: opts.Outcome}
	if ic.outcome == nil {
		ic.outcome = DefaultOutcome
	}
	for r := limit.Reason(1); int(r) < limit.NumReasons; r++ {
		code := codes.Unavailable
		switch r {
		case limit.ReasonFairness:
			code = codes.ResourceExhausted
		case limit.ReasonDeadline, limit.ReasonCancelled:
			code = codes.DeadlineExceeded
		}
		ic.refusals[r] = refusal{
			err:      status.Error(code, "spillway admission refused ("+r.String()+"): "+r.Detail()),
			pushback: code == codes.Unavailable || code == codes.ResourceExhausted,
		}
	}
	return ic
}

// pushbackMD returns the trailer carrying one draw of the Gate's
// Retry-After, in milliseconds.
func (ic *interceptor) pushbackMD() metadata.MD {
	s := ic.g.RetryAfterSeconds()
	p := &ic.pushback[uint(s)%pushbackSlots]
	if e := p.Load(); e != nil && e.secs == s {
		return e.md
	}
	e := &pushbackEntry{secs: s, md: metadata.MD{PushbackKey: {strconv.Itoa(s * 1000)}}}
	p.Store(e)
	return e.md
}

// class returns the call's class: Classify, else the caller's metadata if
// the Gate trusts it and it parses, else the Gate's default class.
func (ic *interceptor) class(ctx context.Context, method string) shed.Class {
	if ic.opts.Classify != nil {
		if c, ok := ic.opts.Classify(ctx, method); ok {
			return c
		}
	}
	if ic.g.TrustClass() {
		if v := metadata.ValueFromIncomingContext(ctx, shed.ClassMetadataKey); len(v) > 0 {
			if c, ok := shed.ParseClass(v[0]); ok {
				return c
			}
		}
	}
	return ic.g.DefaultClass()
}

// enter asks the Gate for a place for the call in ctx at now. slot must be
// the caller's (see admit.Gate.Enter). On refusal it returns the reason and
// t == nil.
func (ic *interceptor) enter(ctx context.Context, method string, now float64, slot *limit.Ticket) (t *limit.Ticket, wait float64, why limit.Reason) {
	req := limit.Request{Class: ic.class(ctx, method)}
	if ic.opts.Cost != nil {
		req.Cost = ic.opts.Cost(ctx, method)
	}
	if ic.opts.Client != nil {
		req.Client = ic.opts.Client(ctx)
	}
	if at, ok := ic.g.Deadline(ctx, now); ok {
		if at <= now {
			// Spent already: refused here, since a deadline at or below 0
			// on the Limiter's timeline would read as none.
			ic.g.Limiter().Refused(req.Class, limit.ReasonDeadline)
			return nil, 0, limit.ReasonDeadline
		}
		req.Deadline = at
	}
	return ic.g.Enter(ctx, now, req, slot)
}

// admitted returns the context an admitted handler runs with: its class
// and, with a Dimmer, the brownout decision.
func (ic *interceptor) admitted(ctx context.Context, t *limit.Ticket, now, wait float64) context.Context {
	ctx = shed.WithClass(ctx, t.Class())
	if ic.g.Dimmer() != nil {
		ctx = brownout.WithOptional(ctx, ic.g.Optional(now+wait))
	}
	return ctx
}

// finish maps the end of an admitted call to an outcome.
func (ic *interceptor) finish(ctx context.Context, err error) limit.Outcome {
	if ce := ctx.Err(); ce != nil {
		err = ce
	}
	return ic.outcome(err)
}

// UnaryServerInterceptor returns an interceptor admitting unary calls
// through g; it panics if g is nil. Per call it:
//
//  1. reads the class — Options.Classify, else the metadata
//     shed.ClassMetadataKey parsed with shed.ParseClass unless the Gate
//     ignores it (an unknown value falls back, it is never an error), else
//     the Gate's DefaultClass — and the call's deadline, which gRPC has
//     already made the context's from grpc-timeout;
//  2. asks the Gate for a place (admit.Gate.Enter): a call whose deadline
//     has passed or cannot be met given the current queue wait is refused
//     before any work; a call finding the limit full waits in the
//     Limiter's queue if it has one, else is refused;
//  3. refuses without calling the handler, with a pre-built status naming
//     the reason (limit.Reason.String): Unavailable when the server is
//     overloaded (limit, queue full, expired, CoDel: a transient state, so
//     clients may retry, elsewhere), ResourceExhausted when the client
//     holds its fair share (a per-client quota), DeadlineExceeded when the
//     deadline passed or the caller left. Unavailable and ResourceExhausted
//     carry the trailer PushbackKey = Gate.RetryAfterSeconds × 1000;
//  4. or calls the handler with a context carrying the class (shed.ClassFrom)
//     and, with a Dimmer, the brownout decision (brownout.OptionalFrom),
//     then reports the outcome (Options.Outcome) to the Limiter and the
//     Dimmer (admit.Gate.Exit). A panicking handler's place is released
//     (outcome Ignore) and the panic goes on.
//
// The refusal path allocates nothing of its own except a one-element copy of
// the class metadata when the caller sends it (and a pushback trailer the
// first time a Retry-After value is drawn); grpc.SetTrailer copies the
// trailer.
func UnaryServerInterceptor(g *admit.Gate, opts Options) grpc.UnaryServerInterceptor {
	ic := newInterceptor(g, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		now := ic.g.Clock().Now()
		var slot limit.Ticket
		t, wait, why := ic.enter(ctx, info.FullMethod, now, &slot)
		if why != limit.Admitted {
			rf := &ic.refusals[why]
			if rf.pushback {
				_ = grpc.SetTrailer(ctx, ic.pushbackMD())
			}
			return nil, rf.err
		}
		ctx = ic.admitted(ctx, t, now, wait)
		o := limit.Ignore
		defer func() { ic.g.Exit(t, now, wait, o) }()
		resp, err := handler(ctx, req)
		o = ic.finish(ctx, err)
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor admitting streams through
// g, as UnaryServerInterceptor admits unary calls; it panics if g is nil.
// A stream is admitted when it starts and holds its place (its Cost) until
// the handler returns, however long it stays open: put long-lived streams
// (watches, subscriptions) behind a Gate of their own, or give them a class
// whose share cannot starve unary calls. The handler's stream is the
// original one with only Context replaced.
func StreamServerInterceptor(g *admit.Gate, opts Options) grpc.StreamServerInterceptor {
	ic := newInterceptor(g, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		now := ic.g.Clock().Now()
		var slot limit.Ticket
		t, wait, why := ic.enter(ctx, info.FullMethod, now, &slot)
		if why != limit.Admitted {
			rf := &ic.refusals[why]
			if rf.pushback {
				ss.SetTrailer(ic.pushbackMD())
			}
			return rf.err
		}
		ctx = ic.admitted(ctx, t, now, wait)
		o := limit.Ignore
		defer func() { ic.g.Exit(t, now, wait, o) }()
		err := handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
		o = ic.finish(ctx, err)
		return err
	}
}

// serverStream is a grpc.ServerStream whose Context carries the admission's
// class and brownout decision.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the stream's context with the admission's values.
func (s *serverStream) Context() context.Context { return s.ctx }
