package clientgrpc_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/client/clientgrpc"
)

func watch(t *testing.T, h *harness, ctx context.Context, service string) grpc_health_v1.Health_WatchClient {
	t.Helper()
	st, err := h.client.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("Watch(%q): %v", service, err)
	}
	return st
}

// reports is the number of outcomes the breaker was told or cancelled.
func reports(b *breaker.Breaker) uint64 {
	c := b.Counters()
	return c.Successes + c.Slow + c.Failures + c.Cancelled
}

// The bulkhead place is held while the stream is open, and given back when
// it ends (read to io.EOF, failed, or cancelled by the caller); the breaker
// hears the stream's final status, or nothing when the caller gave up.
func TestStreamHoldsBulkheadPlace(t *testing.T) {
	bh, err := client.NewBulkhead(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	br := newBreaker(t, 100)
	h := serve(t, clientgrpc.Config{Bulkhead: bh, Breaker: br})
	ctx := context.Background()

	// Open, then read to the end.
	st := watch(t, h, ctx, "hold")
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if n := bh.Limiter().InFlight(); n != 1 {
		t.Fatalf("in flight %d while the stream is open, want 1", n)
	}
	_, err = h.client.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: "end"})
	local(t, err, client.BulkheadFull, codes.ResourceExhausted)
	h.b.releaseAll()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("Recv after release: %v, want io.EOF", err)
	}
	if n := bh.Limiter().InFlight(); n != 0 {
		t.Fatalf("in flight %d after io.EOF, want 0", n)
	}
	// The refused stream's ticket was cancelled: the bulkhead's refusal
	// says nothing of the dependency.
	if c := br.Counters(); c.Successes != 1 || c.Cancelled != 1 || reports(br) != 2 {
		t.Fatalf("breaker %+v after a stream ended OK, want one success, one cancelled (the refused stream)", c)
	}

	// Abandoned: the caller cancels without reading again.
	cctx, cancel := context.WithCancel(ctx)
	st = watch(t, h, cctx, "wait")
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if n := bh.Limiter().InFlight(); n != 1 {
		t.Fatalf("in flight %d while the second stream is open, want 1", n)
	}
	cancel()
	eventually(t, "abandoned stream's place released", func() bool { return bh.Limiter().InFlight() == 0 })
	eventually(t, "abandoned stream reported", func() bool { return reports(br) == 3 })
	if c := br.Counters(); c.Cancelled != 2 || c.Failures != 0 {
		t.Fatalf("breaker %+v after the caller cancelled, want the ticket cancelled, no failure", c)
	}

	// Failed: the server ends the stream with Unavailable.
	st = watch(t, h, ctx, "fail")
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv: %v, want Unavailable", err)
	}
	if c := br.Counters(); c.Failures != 1 || bh.Limiter().InFlight() != 0 {
		t.Fatalf("breaker %+v, in flight %d after a failed stream; want one failure, 0", c, bh.Limiter().InFlight())
	}
}

func TestStreamBreakerOpenRefuses(t *testing.T) {
	h := serve(t, clientgrpc.Config{Breaker: newBreaker(t, 1)})
	st := watch(t, h, context.Background(), "fail")
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv: %v, want Unavailable", err)
	}
	_, err := h.client.Watch(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: "end"})
	local(t, err, client.BreakerOpen, codes.Unavailable)
	h.b.mu.Lock()
	streams := h.b.streams
	h.b.mu.Unlock()
	if streams != 1 {
		t.Fatalf("server saw %d streams, want 1 (the second refused locally)", streams)
	}
}

// fakeStream is a grpc.ClientStream without a network.
type fakeStream struct {
	ctx  context.Context
	recv func() error
	send error
}

func (f *fakeStream) Header() (metadata.MD, error) { return nil, nil }
func (f *fakeStream) Trailer() metadata.MD         { return nil }
func (f *fakeStream) CloseSend() error             { return nil }
func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SendMsg(any) error            { return f.send }
func (f *fakeStream) RecvMsg(any) error            { return f.recv() }

type fakeRig struct {
	ic *clientgrpc.Interceptors
	br *breaker.Breaker
	bh *admit.Gate
}

func newFakeRig(t *testing.T) *fakeRig {
	t.Helper()
	bh, err := client.NewBulkhead(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	br := newBreaker(t, 1000)
	ic, err := clientgrpc.New(clientgrpc.Config{Bulkhead: bh, Breaker: br})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeRig{ic: ic, br: br, bh: bh}
}

// open starts a stream over a fakeStream through the interceptor.
func (r *fakeRig) open(t *testing.T, ctx context.Context, desc *grpc.StreamDesc, fs *fakeStream, streamErr error) (grpc.ClientStream, error) {
	t.Helper()
	streamer := func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
		if streamErr != nil {
			return nil, streamErr
		}
		fs.ctx = ctx
		return fs, nil
	}
	return r.ic.Stream()(ctx, desc, nil, "/test.Svc/Stream", streamer)
}

// A client-streaming call ends at its one RecvMsg (nil is OK); a later
// cancel reports nothing more.
func TestStreamClientStreamingEndsAtResponse(t *testing.T) {
	r := newFakeRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := r.open(t, ctx, &grpc.StreamDesc{ClientStreams: true}, &fakeStream{recv: func() error { return nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.bh.Limiter().InFlight(); n != 1 {
		t.Fatalf("in flight %d while open, want 1", n)
	}
	if err := s.SendMsg(nil); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseSend()
	if err := s.RecvMsg(nil); err != nil {
		t.Fatal(err)
	}
	if n := r.bh.Limiter().InFlight(); n != 0 {
		t.Fatalf("in flight %d after the response, want 0", n)
	}
	cancel()
	time.Sleep(50 * time.Millisecond) // room for a wrongly registered AfterFunc to report
	if c := r.br.Counters(); c.Successes != 1 || reports(r.br) != 1 {
		t.Fatalf("breaker %+v, want exactly one success", c)
	}
}

// Whatever ends a stream, its end is reported exactly once, also when the
// caller cancels while RecvMsg returns an error.
func TestStreamEndReportedOnce(t *testing.T) {
	r := newFakeRig(t)
	desc := &grpc.StreamDesc{ServerStreams: true}
	const streams = 200
	for range streams {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := r.open(t, ctx, desc, &fakeStream{recv: func() error { return status.Error(codes.Unavailable, "x") }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); cancel() }()
		_ = s.RecvMsg(nil)
		_ = s.RecvMsg(nil) // a second end is ignored
		wg.Wait()
	}
	eventually(t, "every stream reported", func() bool { return reports(r.br) >= streams })
	time.Sleep(50 * time.Millisecond) // room for a double report to show
	if n := reports(r.br); n != streams {
		t.Fatalf("%d breaker reports for %d streams, want exactly one each", n, streams)
	}
	if n := r.bh.Limiter().InFlight(); n != 0 {
		t.Fatalf("in flight %d after every stream ended, want 0", n)
	}
}

// A SendMsg error other than io.EOF ends the stream without blaming the
// dependency; io.EOF does not end it (the status comes from RecvMsg).
func TestStreamSendErrors(t *testing.T) {
	r := newFakeRig(t)
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	fs := &fakeStream{recv: func() error { return io.EOF }, send: io.EOF}
	s, err := r.open(t, context.Background(), desc, fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(nil); err != io.EOF {
		t.Fatal(err)
	}
	if n := r.bh.Limiter().InFlight(); n != 1 || reports(r.br) != 0 {
		t.Fatalf("after SendMsg io.EOF: in flight %d, %d reports; want the stream still open", n, reports(r.br))
	}
	if err := s.RecvMsg(nil); err != io.EOF {
		t.Fatal(err)
	}
	if c := r.br.Counters(); c.Successes != 1 || r.bh.Limiter().InFlight() != 0 {
		t.Fatalf("after RecvMsg io.EOF: breaker %+v, in flight %d", c, r.bh.Limiter().InFlight())
	}

	fs = &fakeStream{recv: func() error { return io.EOF }, send: status.Error(codes.Internal, "cannot marshal")}
	s, _ = r.open(t, context.Background(), desc, fs, nil)
	_ = s.SendMsg(nil)
	if c := r.br.Counters(); c.Cancelled != 1 || c.Failures != 0 || r.bh.Limiter().InFlight() != 0 {
		t.Fatalf("after a local SendMsg error: breaker %+v, in flight %d; want cancelled, released", c, r.bh.Limiter().InFlight())
	}
}

// A stream gRPC could not open ends at once with its error as the outcome.
func TestStreamOpenError(t *testing.T) {
	r := newFakeRig(t)
	_, err := r.open(t, context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, status.Error(codes.Unavailable, "no connection"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("open: %v", err)
	}
	var le *clientgrpc.Error
	if errors.As(err, &le) {
		t.Fatal("a remote error was turned into a local refusal")
	}
	if c := r.br.Counters(); c.Failures != 1 || r.bh.Limiter().InFlight() != 0 {
		t.Fatalf("breaker %+v, in flight %d; want one failure, released", c, r.bh.Limiter().InFlight())
	}
}
