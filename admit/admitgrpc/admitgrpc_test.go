package admitgrpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
	"go.uber.org/goleak"
)

// wait is the generous bound for anything polled or awaited: far above what
// a busy 2-core machine needs, reached only when a test is failing.
const wait = 10 * time.Second

const checkMethod = "/grpc.health.v1.Health/Check"

// svc is the health service the tests serve. Check with Service:
//
//	""      answers SERVING at once
//	"block" signals entered, then waits for release (or the call's end)
//	"panic" panics
//
// Watch sends SERVING, then waits for release or the stream's end. Both
// record the class and the fairness key their context carries.
type svc struct {
	grpc_health_v1.UnimplementedHealthServer
	calls   atomic.Int64 // handler invocations
	entered chan struct{}
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	classes []shed.Class // class seen by each handler, noClass when none
	peers   []uint64     // PeerClient(ctx) seen by each handler
}

// noClass records a handler context without a class.
const noClass = shed.Class(200)

func newSvc() *svc {
	return &svc{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (s *svc) releaseAll() { s.once.Do(func() { close(s.release) }) }

func (s *svc) record(ctx context.Context) {
	s.calls.Add(1)
	c, ok := shed.ClassFrom(ctx)
	if !ok {
		c = noClass
	}
	s.mu.Lock()
	s.classes = append(s.classes, c)
	s.peers = append(s.peers, PeerClient(ctx))
	s.mu.Unlock()
}

func (s *svc) lastClass() shed.Class {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.classes[len(s.classes)-1]
}

func (s *svc) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	s.record(ctx)
	switch req.GetService() {
	case "block":
		s.entered <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	case "panic":
		panic("handler panics")
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (s *svc) Watch(req *grpc_health_v1.HealthCheckRequest, ss grpc.ServerStreamingServer[grpc_health_v1.HealthCheckResponse]) error {
	s.record(ss.Context())
	if err := ss.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	select {
	case <-s.release:
		return nil
	case <-ss.Context().Done():
		return status.FromContextError(ss.Context().Err()).Err()
	}
}

// newGate returns a Gate over a Fixed(n) limit.
func newGate(t testing.TB, n int, lc limit.LimiterConfig, gc admit.Config) *admit.Gate {
	t.Helper()
	alg, err := limit.NewFixed(n)
	if err != nil {
		t.Fatal(err)
	}
	l, err := limit.NewLimiter(alg, lc)
	if err != nil {
		t.Fatal(err)
	}
	gc.Limiter = l
	g, err := admit.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// single is a LimiterConfig with one class, so a limit of 1 admits one call
// of any class.
var single = limit.LimiterConfig{Shares: []float64{1}}

type server struct {
	svc    *svc
	client grpc_health_v1.HealthClient
	stop   func()
}

// serve starts a real server on 127.0.0.1:0 behind g (outer interceptors
// first) and a client connected to it.
func serve(t *testing.T, g *admit.Gate, opts Options, outer ...grpc.UnaryServerInterceptor) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newSvc()
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(append(outer, UnaryServerInterceptor(g, opts))...),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(g, opts)),
	)
	grpc_health_v1.RegisterHealthServer(srv, s)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.releaseAll()
			_ = conn.Close()
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return &server{svc: s, client: grpc_health_v1.NewHealthClient(conn), stop: stop}
}

func withMD(kv ...string) context.Context {
	return metadata.NewOutgoingContext(context.Background(), metadata.Pairs(kv...))
}

// hold starts a blocking Check in the background and returns once its
// handler runs (so it holds its place); the returned channel gets its error.
func (s *server) hold(t *testing.T, ctx context.Context) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := s.client.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "block"})
		errc <- err
	}()
	select {
	case <-s.svc.entered:
	case err := <-errc:
		t.Fatalf("holding call ended before its handler ran: %v", err)
	case <-time.After(wait):
		t.Fatal("holding call never reached its handler")
	}
	return errc
}

func recv(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(wait):
		t.Fatal("call did not end")
		return nil
	}
}

// eventually polls cond every 5 ms until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not reached within %v", what, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkPushback checks the trailer's pushback is one of want (ms).
func checkPushback(t *testing.T, tr metadata.MD, want ...int) {
	t.Helper()
	v := tr.Get(PushbackKey)
	if len(v) != 1 {
		t.Fatalf("trailer %s = %q, want one value", PushbackKey, v)
	}
	ms, err := strconv.Atoi(v[0])
	if err != nil {
		t.Fatalf("trailer %s = %q: %v", PushbackKey, v[0], err)
	}
	for _, w := range want {
		if ms == w {
			return
		}
	}
	t.Fatalf("trailer %s = %d, want one of %v", PushbackKey, ms, want)
}

func TestAdmittedCallSeesClass(t *testing.T) {
	g := newGate(t, 10, limit.LimiterConfig{}, admit.Config{})
	s := serve(t, g, Options{})
	for _, tc := range []struct {
		md   []string
		want shed.Class
	}{
		{nil, shed.Default},
		{[]string{shed.ClassMetadataKey, "critical"}, shed.Critical},
		{[]string{shed.ClassMetadataKey, "sheddable"}, shed.Sheddable},
		{[]string{shed.ClassMetadataKey, "CRITICAL_PLUS"}, shed.Critical},
		{[]string{shed.ClassMetadataKey, "no such class"}, shed.Default}, // never an error
	} {
		resp, err := s.client.Check(withMD(tc.md...), &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("md %q: %v", tc.md, err)
		}
		if resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("md %q: status %v", tc.md, resp.GetStatus())
		}
		if got := s.svc.lastClass(); got != tc.want {
			t.Errorf("md %q: handler saw class %v, want %v", tc.md, got, tc.want)
		}
	}
	if n := g.Limiter().InFlight(); n != 0 {
		t.Errorf("InFlight after the calls = %d, want 0", n)
	}
	if n := g.Goodput(shed.Default); n != 2 {
		t.Errorf("Goodput(default) = %d, want 2", n)
	}
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	if s.svc.peers[0] == 0 || s.svc.peers[0] != s.svc.peers[len(s.svc.peers)-1] {
		t.Errorf("PeerClient over loopback = %v, want one non-zero key", s.svc.peers)
	}
}

func TestIgnoreClassHeader(t *testing.T) {
	g := newGate(t, 10, limit.LimiterConfig{}, admit.Config{IgnoreClassHeader: true, DefaultClass: "sheddable"})
	s := serve(t, g, Options{})
	if _, err := s.client.Check(withMD(shed.ClassMetadataKey, "critical"), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := s.svc.lastClass(); got != shed.Sheddable {
		t.Errorf("class with IgnoreClassHeader = %v, want the default class sheddable", got)
	}
}

func TestClassifyWins(t *testing.T) {
	g := newGate(t, 10, limit.LimiterConfig{}, admit.Config{})
	var methods sync.Map
	s := serve(t, g, Options{Classify: func(_ context.Context, m string) (shed.Class, bool) {
		methods.Store(m, true)
		return shed.Sheddable, m == checkMethod
	}})
	ctx := withMD(shed.ClassMetadataKey, "critical")
	if _, err := s.client.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := s.svc.lastClass(); got != shed.Sheddable {
		t.Errorf("Check: class %v, want sheddable from Classify over critical metadata", got)
	}
	// Classify declines Watch: the metadata decides.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.client.Watch(wctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if got := s.svc.lastClass(); got != shed.Critical {
		t.Errorf("Watch: class %v, want critical from metadata when Classify declines", got)
	}
	for _, m := range []string{checkMethod, "/grpc.health.v1.Health/Watch"} {
		if _, ok := methods.Load(m); !ok {
			t.Errorf("Classify never saw full method %q", m)
		}
	}
}

func TestLimitFullUnavailable(t *testing.T) {
	g := newGate(t, 1, single, admit.Config{})
	s := serve(t, g, Options{})
	held := s.hold(t, context.Background())
	before := s.svc.calls.Load()

	var tr metadata.MD
	_, err := s.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&tr))
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("call at a full limit: %v, want Unavailable", err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "(limit)") {
		t.Errorf("message %q does not name the reason limit", msg)
	}
	checkPushback(t, tr, 1000, 2000, 3000) // RetryAfter 1 + jitter 0..2
	if n := s.svc.calls.Load(); n != before {
		t.Errorf("handler called %d times for a refused call", n-before)
	}
	if n := g.Limiter().Counts(shed.Default).Rejects[limit.ReasonLimit]; n != 1 {
		t.Errorf("Rejects[limit] = %d, want 1", n)
	}

	s.svc.releaseAll()
	if err := recv(t, held); err != nil {
		t.Fatalf("held call: %v", err)
	}
	if n := g.Limiter().InFlight(); n != 0 {
		t.Errorf("InFlight after the held call = %d, want 0", n)
	}
	if _, err := s.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Errorf("call after the place freed: %v", err)
	}
}

func TestFairnessResourceExhausted(t *testing.T) {
	// Limit 4, one class, fairness from 2 places in flight: with clients 1
	// and 2 active the share is 2 places each.
	lc := limit.LimiterConfig{Shares: []float64{1}, Fairness: limit.FairnessConfig{Slots: 64, Pressure: 0.5}}
	g := newGate(t, 4, lc, admit.Config{})
	s := serve(t, g, Options{Client: func(ctx context.Context) uint64 {
		v := metadata.ValueFromIncomingContext(ctx, "x-client")
		if len(v) == 0 {
			return 0
		}
		n, _ := strconv.ParseUint(v[0], 10, 64)
		return n
	}})
	a, b := withMD("x-client", "1"), withMD("x-client", "2")
	s.hold(t, a)
	s.hold(t, b)
	s.hold(t, a)

	var tr metadata.MD
	before := s.svc.calls.Load()
	_, err := s.client.Check(a, &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&tr))
	if code := status.Code(err); code != codes.ResourceExhausted {
		t.Fatalf("third call of client 1: %v, want ResourceExhausted", err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "(fairness)") {
		t.Errorf("message %q does not name the reason fairness", msg)
	}
	checkPushback(t, tr, 1000, 2000, 3000)
	if n := s.svc.calls.Load(); n != before {
		t.Errorf("handler called for a refused call")
	}
	// The lighter client is still admitted.
	s.hold(t, b)
	if n := g.Limiter().InFlight(); n != 4 {
		t.Errorf("InFlight = %d, want 4", n)
	}
}

func TestDeadlineWhileQueued(t *testing.T) {
	// MaxWait is far beyond the call's 50 ms, so that a loaded machine's
	// delays cannot be mistaken for a wait to MaxWait.
	lc := limit.LimiterConfig{Shares: []float64{1}, Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 60}}
	g := newGate(t, 1, lc, admit.Config{})
	var arrived, returned atomic.Int64
	countReturns := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		defer returned.Add(1)
		return h(ctx, req)
	}
	s := serve(t, g, Options{Cost: func(context.Context, string) int { arrived.Add(1); return 1 }}, countReturns)
	held := s.hold(t, context.Background())
	before := s.svc.calls.Load()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.client.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if code := status.Code(err); code != codes.DeadlineExceeded {
		t.Fatalf("queued call with a 50 ms timeout: %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("queued call ended after %v: it waited for MaxWait, not its deadline", el)
	}
	// The server refuses it from the queue at its deadline (as "deadline",
	// or "cancelled" if the client's reset arrives first).
	refused := func() uint64 {
		r := g.Limiter().Counts(shed.Default).Rejects
		return r[limit.ReasonDeadline] + r[limit.ReasonCancelled]
	}
	eventually(t, "server-side refusal of the expired call", func() bool { return arrived.Load() == 2 && refused() == 1 })
	if n := s.svc.calls.Load(); n != before {
		t.Errorf("handler ran for the expired call")
	}
	// The server's goroutine for it ends: the interceptor does not stay
	// blocked once the call has been withdrawn from the queue.
	eventually(t, "interceptor returns for the expired call", func() bool { return returned.Load() == 1 })

	s.svc.releaseAll()
	if err := recv(t, held); err != nil {
		t.Fatalf("held call: %v", err)
	}
	eventually(t, "InFlight and QueueLen back to 0", func() bool {
		return g.Limiter().InFlight() == 0 && g.Limiter().QueueLen() == 0
	})
}

func TestQueuedCallAdmittedWhenPlaceFrees(t *testing.T) {
	lc := limit.LimiterConfig{Shares: []float64{1}, Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 5}}
	g := newGate(t, 1, lc, admit.Config{})
	s := serve(t, g, Options{})
	s.hold(t, context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
		errc <- err
	}()
	eventually(t, "second call queued", func() bool { return g.Limiter().QueueLen() == 1 })
	s.svc.releaseAll()
	if err := recv(t, errc); err != nil {
		t.Fatalf("queued call: %v", err)
	}
	if n := g.Limiter().Counts(shed.Default).Admitted; n != 2 {
		t.Errorf("Admitted = %d, want 2", n)
	}
}

func TestCost(t *testing.T) {
	g := newGate(t, 2, single, admit.Config{})
	s := serve(t, g, Options{Cost: func(context.Context, string) int { return 2 }})
	s.hold(t, context.Background())
	if n := g.Limiter().InFlight(); n != 2 {
		t.Errorf("InFlight with one call of cost 2 = %d, want 2", n)
	}
	_, err := s.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	if code := status.Code(err); code != codes.Unavailable {
		t.Errorf("second call: %v, want Unavailable", err)
	}
}

func TestStreamHoldsPlace(t *testing.T) {
	g := newGate(t, 1, single, admit.Config{})
	s := serve(t, g, Options{})
	ctx1, cancel1 := context.WithCancel(withMD(shed.ClassMetadataKey, "critical"))
	defer cancel1()
	st1, err := s.client.Watch(ctx1, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st1.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if got := s.svc.lastClass(); got != shed.Critical {
		t.Errorf("stream handler saw class %v, want critical", got)
	}
	if n := g.Limiter().InFlight(); n != 1 {
		t.Fatalf("InFlight with a stream open = %d, want 1", n)
	}

	before := s.svc.calls.Load()
	st2, err := s.client.Watch(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st2.Recv()
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("second stream at limit 1: %v, want Unavailable", err)
	}
	checkPushback(t, st2.Trailer(), 1000, 2000, 3000)
	if n := s.svc.calls.Load(); n != before {
		t.Errorf("stream handler ran for a refused stream")
	}

	cancel1() // the client closes the first stream
	eventually(t, "place freed after the stream closed", func() bool { return g.Limiter().InFlight() == 0 })

	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	st3, err := s.client.Watch(ctx3, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st3.Recv(); err != nil {
		t.Errorf("stream after the place freed: %v", err)
	}
}

func TestPanicReleasesPlace(t *testing.T) {
	g := newGate(t, 1, single, admit.Config{})
	recoverer := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, status.Error(codes.Internal, fmt.Sprint("recovered: ", r))
			}
		}()
		return h(ctx, req)
	}
	s := serve(t, g, Options{}, recoverer)
	_, err := s.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: "panic"})
	if code := status.Code(err); code != codes.Internal {
		t.Fatalf("panicking handler: %v, want Internal from the recovering interceptor", err)
	}
	if n := g.Limiter().InFlight(); n != 0 {
		t.Errorf("InFlight after a panic = %d, want 0", n)
	}
	if n := g.Goodput(shed.Default); n != 0 {
		t.Errorf("a panicking call counted as goodput (%d): its outcome should be Ignore", n)
	}
	if _, err := s.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Errorf("call after the panic: %v", err)
	}
}

func TestDefaultOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want limit.Outcome
	}{
		{"nil", nil, limit.Success},
		{"Canceled", status.Error(codes.Canceled, "x"), limit.Ignore},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "x"), limit.Dropped},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "x"), limit.Dropped},
		{"Unavailable", status.Error(codes.Unavailable, "x"), limit.Dropped},
		{"Internal", status.Error(codes.Internal, "x"), limit.Success},
		{"NotFound", status.Error(codes.NotFound, "x"), limit.Success},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "x"), limit.Success},
		{"Unknown", status.Error(codes.Unknown, "x"), limit.Success},
		{"plain error", errors.New("x"), limit.Success},
		{"context.Canceled", context.Canceled, limit.Ignore},
		{"context.DeadlineExceeded", context.DeadlineExceeded, limit.Dropped},
		{"wrapped deadline", fmt.Errorf("downstream: %w", context.DeadlineExceeded), limit.Dropped},
		{"wrapped Unavailable", fmt.Errorf("downstream: %w", status.Error(codes.Unavailable, "x")), limit.Dropped},
		{"FromContextError(Canceled)", status.FromContextError(context.Canceled).Err(), limit.Ignore},
	} {
		if got := DefaultOutcome(tc.err); got != tc.want {
			t.Errorf("DefaultOutcome(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRefusalStatuses(t *testing.T) {
	g := newGate(t, 1, single, admit.Config{})
	ic := newInterceptor(g, Options{})
	for _, tc := range []struct {
		r        limit.Reason
		code     codes.Code
		pushback bool
	}{
		{limit.ReasonLimit, codes.Unavailable, true},
		{limit.ReasonQueueFull, codes.Unavailable, true},
		{limit.ReasonFairness, codes.ResourceExhausted, true},
		{limit.ReasonExpired, codes.Unavailable, true},
		{limit.ReasonCoDel, codes.Unavailable, true},
		{limit.ReasonDeadline, codes.DeadlineExceeded, false},
		{limit.ReasonCancelled, codes.DeadlineExceeded, false},
	} {
		rf := ic.refusals[tc.r]
		st := status.Convert(rf.err)
		if st.Code() != tc.code || rf.pushback != tc.pushback {
			t.Errorf("%v: code %v pushback %v, want %v %v", tc.r, st.Code(), rf.pushback, tc.code, tc.pushback)
		}
		if !strings.Contains(st.Message(), "("+tc.r.String()+")") {
			t.Errorf("%v: message %q does not name the reason", tc.r, st.Message())
		}
	}
}

// fakeStream stands in for gRPC's server transport stream: it records the
// trailer set on it.
type fakeStream struct{ trailer metadata.MD }

func (f *fakeStream) Method() string               { return checkMethod }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(md metadata.MD) error {
	f.trailer = metadata.Join(f.trailer, md)
	return nil
}

var checkInfo = &grpc.UnaryServerInfo{FullMethod: checkMethod}

func TestPushbackExactAndSpentDeadline(t *testing.T) {
	g := newGate(t, 1, single, admit.Config{RetryAfter: 5, RetryJitter: -1})
	it := UnaryServerInterceptor(g, Options{})
	var called int
	h := func(context.Context, any) (any, error) { called++; return "ok", nil }

	hold, ok := g.Limiter().Acquire(0, shed.Critical)
	if !ok {
		t.Fatal("could not take the only place")
	}
	for i := range 2 { // the second refusal reuses the cached trailer
		fs := &fakeStream{}
		_, err := it(grpc.NewContextWithServerTransportStream(context.Background(), fs), nil, checkInfo, h)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("refusal %d: %v, want Unavailable", i, err)
		}
		if v := fs.trailer.Get(PushbackKey); len(v) != 1 || v[0] != "5000" {
			t.Errorf("refusal %d: pushback %q, want [5000] (RetryAfter 5 s, no jitter)", i, v)
		}
	}
	hold.Done(0, limit.Ignore)

	// A call whose deadline has passed: refused before any work, no pushback.
	fs := &fakeStream{}
	ctx, cancel := context.WithDeadline(grpc.NewContextWithServerTransportStream(context.Background(), fs), time.Now().Add(-time.Hour))
	defer cancel()
	_, err := it(ctx, nil, checkInfo, h)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("spent deadline: %v, want DeadlineExceeded", err)
	}
	if len(fs.trailer) != 0 {
		t.Errorf("deadline refusal set trailer %v, want none", fs.trailer)
	}
	if n := g.Limiter().Counts(shed.Default).Rejects[limit.ReasonDeadline]; n != 1 {
		t.Errorf("Rejects[deadline] = %d, want 1", n)
	}
	if called != 0 {
		t.Errorf("handler called %d times, want 0", called)
	}
	if n := g.Limiter().InFlight(); n != 0 {
		t.Errorf("InFlight = %d, want 0", n)
	}
}

func TestOutcomeGetsHandlerOrContextError(t *testing.T) {
	g := newGate(t, 1, single, admit.Config{})
	var got []error
	it := UnaryServerInterceptor(g, Options{Outcome: func(err error) limit.Outcome {
		got = append(got, err)
		return limit.Ignore
	}})
	unavailable := status.Error(codes.Unavailable, "downstream")
	if _, err := it(context.Background(), nil, checkInfo, func(context.Context, any) (any, error) {
		return nil, unavailable
	}); err != unavailable {
		t.Fatalf("handler error not returned as is: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := it(ctx, nil, checkInfo, func(context.Context, any) (any, error) {
		cancel() // the client leaves while the handler runs
		return "late", nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != unavailable || got[1] != context.Canceled {
		t.Errorf("Outcome saw %v, want [the handler's error, context.Canceled]", got)
	}
	if n := g.Limiter().InFlight(); n != 0 {
		t.Errorf("InFlight = %d, want 0", n)
	}
}

func TestPeerClient(t *testing.T) {
	at := func(a net.Addr) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
	}
	tcp := func(ip string, port int) context.Context {
		return at(&net.TCPAddr{IP: net.ParseIP(ip), Port: port})
	}
	if k := PeerClient(context.Background()); k != 0 {
		t.Errorf("no peer: %d, want 0", k)
	}
	a1, a2 := PeerClient(tcp("10.0.0.1", 1000)), PeerClient(tcp("10.0.0.1", 2000))
	if a1 == 0 || a1 != a2 {
		t.Errorf("same host, two ports: %d and %d, want one non-zero key", a1, a2)
	}
	v4 := PeerClient(at(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 1}))
	if v4 != a1 {
		t.Errorf("4-byte and 16-byte forms of one IPv4 address: %d and %d, want equal", v4, a1)
	}
	if b := PeerClient(tcp("10.0.0.2", 1000)); b == a1 || b == 0 {
		t.Errorf("another host: %d (first host %d), want a different non-zero key", b, a1)
	}
	if u := PeerClient(at(&net.UnixAddr{Name: "/run/app.sock", Net: "unix"})); u == 0 || u == a1 {
		t.Errorf("unix peer: %d, want a non-zero key of its own", u)
	}
	// A non-TCP address type naming the same host hashes the same.
	if s := PeerClient(at(strAddr("10.0.0.1:443"))); s != a1 {
		t.Errorf("host:port text of the same host: %d, want %d", s, a1)
	}
}

type strAddr string

func (a strAddr) Network() string { return "test" }
func (a strAddr) String() string  { return string(a) }

func TestNilGatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("UnaryServerInterceptor(nil, …) did not panic")
		}
	}()
	UnaryServerInterceptor(nil, Options{})
}

func TestNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()

	lc := limit.LimiterConfig{Shares: []float64{1}, Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 5}}
	g := newGate(t, 1, lc, admit.Config{})
	s := serve(t, g, Options{})
	held := s.hold(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, _ = s.client.Check(ctx, &grpc_health_v1.HealthCheckRequest{}) // queued, then expired
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	st, err := s.client.Watch(sctx, &grpc_health_v1.HealthCheckRequest{})
	if err == nil {
		_, _ = st.Recv() // queued, then expired
	}
	scancel()
	s.svc.releaseAll()
	if err := recv(t, held); err != nil {
		t.Fatalf("held call: %v", err)
	}
	s.stop()

	leakcheck.Verify(t, wait, ignore)
}
