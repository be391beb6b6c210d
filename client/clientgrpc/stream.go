package clientgrpc

import (
	"context"
	"io"
	"math/rand/v2"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// Stream returns the stream client interceptor. At the stream's start, in
// this order: Throttle.Allow, Breaker.Allow, a Bulkhead place (refusals as
// in Unary: the same pre-built *Error values, nothing sent), the class
// forwarded in metadata; then the stream is opened. Streams are never
// retried: a stream cannot be replayed.
//
// The returned stream wraps gRPC's and watches how it ends, which is when
// gRPC's own contract (grpc.ClientConn.NewStream) says its resources are
// released:
//
//   - RecvMsg returns an error: io.EOF is the status OK, any other error
//     is the stream's final status; for a stream whose server does not
//     stream (unary or client-streaming methods), the first RecvMsg to
//     return ends it, nil being OK;
//   - SendMsg returns an error other than io.EOF: gRPC ended the stream for
//     a problem on this side (the message could not be encoded or was too
//     large), which says nothing of the dependency;
//   - the context ends: the caller gave up, even if it never calls the
//     stream again. This is watched with context.AfterFunc, which starts no
//     goroutine for contexts of package context (and one, for the stream's
//     life, for other context implementations).
//
// Whichever comes first, once: the breaker gets the outcome (DefaultFailure
// or Config.Failure of the final status; nothing when the caller gave up or
// the failure was this side's), the bulkhead place is given back, and the
// throttle learns the answer unless the stream already told it (the first
// message received counts as an accept, so a long-lived stream does not
// look refused while it runs). A stream that the caller neither reads to
// its end nor cancels, on a connection that is never closed, holds its
// place forever, as it holds gRPC's resources.
//
// A stream costs a few allocations of its own (the wrapper and the
// context.AfterFunc registration).
func (ic *Interceptors) Stream() grpc.StreamClientInterceptor { return ic.stream }

func (ic *Interceptors) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	now := ic.clk.Now()
	if ic.throttle != nil && !ic.throttle.Allow(now, rand.Float64()) {
		ic.counters.Refused()
		return nil, refusal(client.Throttled, 0)
	}
	var bt breaker.Ticket
	if ic.breaker != nil {
		var err error
		if bt, err = ic.breaker.Allow(now); err != nil {
			ic.counters.Refused()
			return nil, refusal(client.BreakerOpen, 0)
		}
	}
	s := &clientStream{ic: ic, ctx: ctx, bt: bt, start: now, serverStreams: desc.ServerStreams}
	if ic.bulkhead != nil {
		place, _, why := ic.bulkhead.Enter(ctx, now, limit.Request{Class: shed.Critical}, &s.slot)
		if why != limit.Admitted {
			s.bt.Cancel()
			ic.counters.Refused()
			if cerr := ctx.Err(); cerr != nil {
				return nil, status.FromContextError(cerr).Err()
			}
			return nil, refusal(client.BulkheadFull, 0)
		}
		s.place = place
	}
	ic.counters.Sent()
	cs, err := streamer(forwardClass(ctx), desc, cc, method, opts...)
	if err != nil {
		s.end(err, false)
		return nil, err
	}
	s.ClientStream = cs
	s.stop = context.AfterFunc(ctx, s.abandoned)
	return s, nil
}

// clientStream is a grpc.ClientStream reporting its end to the
// interceptors' layers, once.
type clientStream struct {
	grpc.ClientStream
	ic            *Interceptors
	ctx           context.Context // the caller's
	bt            breaker.Ticket  // touched only by the winner of ended
	slot          limit.Ticket    // the bulkhead place, when admitted at once
	place         *limit.Ticket   // the place held: &slot, or a queued waiter's; nil without a bulkhead
	start         float64
	serverStreams bool
	stop          func() bool // stops the AfterFunc; set before the caller gets the stream

	recorded atomic.Bool // the throttle has been told
	ended    atomic.Bool
}

// RecvMsg receives a message and ends the stream when it ended.
func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil && s.serverStreams {
		if !s.recorded.Load() && s.ic.throttle != nil && s.recorded.CompareAndSwap(false, true) {
			s.ic.throttle.Record(s.ic.clk.Now(), true)
		}
		return nil
	}
	final := err
	if err == io.EOF {
		final = nil
	}
	if s.end(final, false) {
		s.stop()
	}
	return err
}

// SendMsg sends a message; an error other than io.EOF ends the stream (see
// Stream).
func (s *clientStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF && s.end(err, true) {
		s.stop()
	}
	return err
}

// abandoned runs when the caller's context ends.
func (s *clientStream) abandoned() { s.end(s.ctx.Err(), true) }

// end reports the stream's end with its final error (nil for OK) the first
// time it is called, and returns whether it did. silent reports nothing to
// the breaker (the end says nothing of the dependency).
func (s *clientStream) end(err error, silent bool) bool {
	if !s.ended.CompareAndSwap(false, true) {
		return false
	}
	ic := s.ic
	now := ic.clk.Now()
	o := limit.Ignore
	if silent {
		s.bt.Cancel()
	} else {
		o = ic.breakerOutcome(s.ctx, &s.bt, now, err)
	}
	if ic.throttle != nil && s.recorded.CompareAndSwap(false, true) {
		ic.throttle.Record(now, accepted(err))
	}
	if s.place != nil {
		ic.bulkhead.Exit(s.place, s.start, 0, o)
	}
	return true
}
