package clientgrpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/client/clientgrpc"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/throttle"
	"go.uber.org/goleak"
)

// wait bounds anything awaited or polled: far above what a busy 2-core
// machine needs, reached only when a test is failing.
const wait = 10 * time.Second

const checkMethod = "/grpc.health.v1.Health/Check"

// step is one scripted answer of the backend's Check.
type step struct {
	code     codes.Code
	pushback string // trailer retry.PushbackKey, if not empty
}

// arrival is what the backend saw of one Check.
type arrival struct {
	at       time.Time
	class    []string // metadata shed.ClassMetadataKey
	deadline time.Time
	hasDL    bool
}

// backend is the test service, a health server answering from a script.
//
// Check with Service "" answers the next step of the script (the last one
// repeats); with "block" it signals entered, then waits for release (or
// the call's end) and answers OK.
//
// Watch with Service "end" sends SERVING and returns OK; "fail" returns
// Unavailable at once; "hold" sends SERVING, then waits for release (OK) or
// the stream's end; "wait" sends SERVING, then waits for the stream's end.
type backend struct {
	grpc_health_v1.UnimplementedHealthServer
	entered chan struct{}
	release chan struct{}
	once    sync.Once

	mu       sync.Mutex
	script   []step
	arrivals []arrival
	streams  int
}

func (b *backend) releaseAll() { b.once.Do(func() { close(b.release) }) }

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.arrivals)
}

func (b *backend) seen() []arrival {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]arrival(nil), b.arrivals...)
}

func (b *backend) setScript(s ...step) {
	b.mu.Lock()
	b.script, b.arrivals = s, nil
	b.mu.Unlock()
}

func (b *backend) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	a := arrival{at: time.Now()}
	md, _ := metadata.FromIncomingContext(ctx)
	a.class = md.Get(shed.ClassMetadataKey)
	a.deadline, a.hasDL = ctx.Deadline()
	b.mu.Lock()
	st := step{}
	if len(b.script) > 0 {
		st = b.script[min(len(b.arrivals), len(b.script)-1)]
	}
	b.arrivals = append(b.arrivals, a)
	b.mu.Unlock()
	if req.GetService() == "block" {
		b.entered <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if st.pushback != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(retry.PushbackKey, st.pushback))
	}
	if st.code != codes.OK {
		return nil, status.Error(st.code, "scripted "+st.code.String())
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (b *backend) Watch(req *grpc_health_v1.HealthCheckRequest, ss grpc.ServerStreamingServer[grpc_health_v1.HealthCheckResponse]) error {
	b.mu.Lock()
	b.streams++
	b.mu.Unlock()
	serving := &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}
	switch req.GetService() {
	case "fail":
		return status.Error(codes.Unavailable, "scripted stream failure")
	case "hold", "wait":
		if err := ss.Send(serving); err != nil {
			return err
		}
		release := b.release
		if req.GetService() == "wait" {
			release = nil
		}
		select {
		case <-release:
			return nil
		case <-ss.Context().Done():
			return status.FromContextError(ss.Context().Err()).Err()
		}
	}
	return ss.Send(serving)
}

type harness struct {
	b      *backend
	ic     *clientgrpc.Interceptors
	client grpc_health_v1.HealthClient
	stop   func()
}

// serve starts a real server on 127.0.0.1:0 answering from script and a
// client connection through interceptors made from cfg.
func serve(t *testing.T, cfg clientgrpc.Config, script ...step) *harness {
	t.Helper()
	ic, err := clientgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{entered: make(chan struct{}, 64), release: make(chan struct{}), script: script}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, b)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(ic.Unary()),
		grpc.WithChainStreamInterceptor(ic.Stream()))
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			b.releaseAll()
			_ = conn.Close()
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return &harness{b: b, ic: ic, client: grpc_health_v1.NewHealthClient(conn), stop: stop}
}

func (h *harness) check(ctx context.Context) error {
	_, err := h.client.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	return err
}

func fastPolicy(t *testing.T, attempts int, budget *retry.Budget) *retry.Policy {
	t.Helper()
	p, err := retry.NewPolicy(retry.Policy{MaxAttempts: attempts, Backoff: retry.Backoff{Base: 0.001, Cap: 0.002}, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func isCheck(m string) bool { return m == checkMethod }

func newBreaker(t *testing.T, threshold int) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(breaker.Config{Threshold: threshold, Recovery: 60})
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// local returns err's *clientgrpc.Error, failing the test if it is not one
// of reason with code.
func local(t *testing.T, err error, reason client.Reason, code codes.Code) *clientgrpc.Error {
	t.Helper()
	var e *clientgrpc.Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("error %v, want a local %v refusal", err, reason)
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != code || !strings.Contains(st.Message(), reason.String()) {
		t.Fatalf("status %v (ok %v), want code %v naming %q", st, ok, code, reason.String())
	}
	return e
}

func TestRetriesUnavailableThenOK(t *testing.T) {
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck},
		step{code: codes.Unavailable}, step{code: codes.Unavailable}, step{})
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if n := h.b.count(); n != 3 {
		t.Fatalf("server saw %d calls, want 3", n)
	}
	if st := h.ic.Stats(); st.Sent != 3 || st.Retried != 2 {
		t.Fatalf("stats %+v, want 3 sent, 2 retried", st)
	}
}

func TestLastErrorReturnedWhenAttemptsRunOut(t *testing.T) {
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck}, step{code: codes.Unavailable})
	err := h.check(context.Background())
	var le *clientgrpc.Error
	if status.Code(err) != codes.Unavailable || errors.As(err, &le) || h.b.count() != 3 {
		t.Fatalf("error %v after %d calls; want the server's Unavailable after 3", err, h.b.count())
	}
	if st := h.ic.Stats(); st.Stops[retry.StopAttempts] != 1 {
		t.Fatalf("stops %v, want one StopAttempts", st.Stops)
	}
}

// The retry never arrives earlier than the server's pushback asked.
func TestPushbackRespected(t *testing.T) {
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck},
		step{code: codes.Unavailable, pushback: "300"}, step{})
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("call failed: %v", err)
	}
	a := h.b.seen()
	if len(a) != 2 {
		t.Fatalf("server saw %d calls, want 2", len(a))
	}
	if gap := a[1].at.Sub(a[0].at); gap < 300*time.Millisecond {
		t.Fatalf("retry arrived %v after the first attempt, before the 300 ms pushback", gap)
	}

	// ResourceExhausted is retried (by default) only with a pushback.
	h.b.setScript(step{code: codes.ResourceExhausted, pushback: "50"}, step{})
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("ResourceExhausted with pushback: %v, want a successful retry", err)
	}
	if a := h.b.seen(); len(a) != 2 || a[1].at.Sub(a[0].at) < 50*time.Millisecond {
		t.Fatalf("ResourceExhausted with pushback: %d calls, want 2, the retry at least 50 ms later", len(a))
	}
	h.b.setScript(step{code: codes.ResourceExhausted}, step{})
	if err := h.check(context.Background()); status.Code(err) != codes.ResourceExhausted || h.b.count() != 1 {
		t.Fatalf("ResourceExhausted without pushback: %v after %d calls, want it returned after 1", err, h.b.count())
	}
}

// A negative pushback means "do not retry".
func TestNegativePushbackStops(t *testing.T) {
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck},
		step{code: codes.Unavailable, pushback: "-1"}, step{})
	if err := h.check(context.Background()); status.Code(err) != codes.Unavailable || h.b.count() != 1 {
		t.Fatalf("%v after %d calls; want the Unavailable after 1 (pushback -1)", err, h.b.count())
	}
	if st := h.ic.Stats(); st.Stops[retry.StopServer] != 1 || st.Retried != 0 {
		t.Fatalf("stats %+v, want one StopServer and no retry", st)
	}
}

func TestNonIdempotentMethodNotRetried(t *testing.T) {
	script := []step{{code: codes.Unavailable}, {}}
	for _, tc := range []struct {
		name  string
		cfg   clientgrpc.Config
		calls int
	}{
		{"Idempotent nil", clientgrpc.Config{}, 1},
		{"not listed", clientgrpc.Config{Idempotent: func(string) bool { return false }}, 1},
		{"listed", clientgrpc.Config{Idempotent: isCheck}, 2},
		{"RetryNonIdempotent", clientgrpc.Config{RetryNonIdempotent: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Retry = fastPolicy(t, 3, nil)
			h := serve(t, tc.cfg, script...)
			err := h.check(context.Background())
			if n := h.b.count(); n != tc.calls {
				t.Fatalf("server saw %d calls (error %v), want %d", n, err, tc.calls)
			}
		})
	}
}

// Under a flood of Unavailable, retries stay within the budget.
func TestRetriesNeverExceedBudget(t *testing.T) {
	budget, err := retry.NewBudget(retry.BudgetConfig{Max: 2, Ratio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 5, budget), Idempotent: isCheck}, step{code: codes.Unavailable})
	const calls = 200
	for range calls {
		if err := h.check(context.Background()); status.Code(err) != codes.Unavailable {
			t.Fatalf("call: %v, want Unavailable", err)
		}
	}
	retries := h.b.count() - calls
	if bound := 2 + 0.1*calls; float64(retries) > bound {
		t.Fatalf("%d retries for %d calls, above the budget's %v", retries, calls, bound)
	}
	if retries < 10 {
		t.Fatalf("%d retries: the budget's ratio should allow about 20", retries)
	}
	if st := h.ic.Stats(); st.Stops[retry.StopBudget] == 0 || st.Retried != uint64(retries) {
		t.Fatalf("stats %+v: want StopBudget counted and %d retries", st, retries)
	}
}

func TestBreakerOpensAndRefusesLocally(t *testing.T) {
	br := newBreaker(t, 3)
	h := serve(t, clientgrpc.Config{Breaker: br}, step{code: codes.Internal})
	for i := range 3 {
		if err := h.check(context.Background()); status.Code(err) != codes.Internal {
			t.Fatalf("call %d: %v, want the server's Internal", i, err)
		}
	}
	err := h.check(context.Background())
	e := local(t, err, client.BreakerOpen, codes.Unavailable)
	if !errors.Is(err, breaker.ErrOpen) || e.Attempts != 0 {
		t.Fatalf("%v (attempts %d): want errors.Is breaker.ErrOpen, 0 attempts", err, e.Attempts)
	}
	if n := h.b.count(); n != 3 {
		t.Fatalf("server saw %d calls, want 3 (the 4th refused locally)", n)
	}
}

// A refusal by the breaker between retries is retried after the backoff
// (it cost the server nothing) until the attempts run out; the error names
// the attempts that were sent.
func TestBreakerRefusesRetry(t *testing.T) {
	h := serve(t, clientgrpc.Config{Breaker: newBreaker(t, 1), Retry: fastPolicy(t, 3, nil), Idempotent: isCheck},
		step{code: codes.Unavailable})
	e := local(t, h.check(context.Background()), client.BreakerOpen, codes.Unavailable)
	if e.Attempts != 1 || h.b.count() != 1 {
		t.Fatalf("attempts %d, server saw %d; want the retries refused after 1 attempt sent", e.Attempts, h.b.count())
	}
	if st := h.ic.Stats(); st.Retried != 2 || st.Stops[retry.StopAttempts] != 1 {
		t.Fatalf("stats %+v: want 2 retries (both refused by the breaker) and the attempts cap", st)
	}
}

// Errors of the call itself never open the breaker.
func TestClientErrorsNeverOpenBreaker(t *testing.T) {
	br := newBreaker(t, 1)
	h := serve(t, clientgrpc.Config{Breaker: br}, step{code: codes.InvalidArgument})
	for i := range 3 {
		if err := h.check(context.Background()); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("call %d: %v, want the server's InvalidArgument (the breaker must stay closed)", i, err)
		}
	}
	if c := br.Counters(); c.State != breaker.Closed || c.Failures != 0 || c.Successes != 3 {
		t.Fatalf("breaker %+v, want CLOSED with 3 successes", c)
	}
}

func TestBulkheadFull(t *testing.T) {
	bh, err := client.NewBulkhead(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, clientgrpc.Config{Bulkhead: bh})
	held := make(chan error, 1)
	go func() {
		_, err := h.client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: "block"})
		held <- err
	}()
	select {
	case <-h.b.entered:
	case <-time.After(wait):
		t.Fatal("holding call never reached the server")
	}
	local(t, h.check(context.Background()), client.BulkheadFull, codes.ResourceExhausted)
	if n := h.b.count(); n != 1 {
		t.Fatalf("server saw %d calls, want 1 (the second refused locally)", n)
	}
	h.b.releaseAll()
	if err := <-held; err != nil {
		t.Fatalf("holding call: %v", err)
	}
	if n := bh.Limiter().InFlight(); n != 0 {
		t.Fatalf("bulkhead in flight %d after the call ended, want 0", n)
	}
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("call after release: %v", err)
	}
}

func TestThrottleDropsLocally(t *testing.T) {
	th, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, clientgrpc.Config{Throttle: th}, step{code: codes.Unavailable})
	dropped := 0
	const calls = 100
	for range calls {
		err := h.check(context.Background())
		var e *clientgrpc.Error
		if errors.As(err, &e) {
			local(t, err, client.Throttled, codes.Unavailable)
			dropped++
		} else if status.Code(err) != codes.Unavailable {
			t.Fatalf("call: %v", err)
		}
	}
	// With no accepts p = n/(n+1): soon nearly every call is dropped.
	if dropped < calls/2 || h.b.count()+dropped != calls {
		t.Fatalf("%d of %d dropped locally, server saw %d; want most dropped", dropped, calls, h.b.count())
	}
}

func TestClassForwarded(t *testing.T) {
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck}, step{code: codes.Unavailable}, step{})
	ctx := shed.WithClass(context.Background(), shed.Sheddable)
	if err := h.check(ctx); err != nil {
		t.Fatal(err)
	}
	for i, a := range h.b.seen() {
		if len(a.class) != 1 || a.class[0] != "sheddable" {
			t.Errorf("attempt %d: class metadata %q, want [sheddable]", i+1, a.class)
		}
	}
	// Metadata the caller set wins; a context without a class sends none.
	for _, tc := range []struct {
		ctx  context.Context
		want []string
	}{
		{metadata.AppendToOutgoingContext(ctx, shed.ClassMetadataKey, "critical"), []string{"critical"}},
		{context.Background(), nil},
		{shed.WithClass(context.Background(), shed.Class(42)), []string{"class 7"}},
	} {
		h.b.setScript(step{})
		if err := h.check(tc.ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.b.seen()[0].class; strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("class metadata %q, want %q", got, tc.want)
		}
	}
}

// gRPC propagates the caller's deadline: the server's budget is never more
// than the caller's. (The server's deadline is its arrival time plus the
// budget sent, so it trails the caller's by the time on the wire, which
// lies within the call; grpc-timeout rounds the budget up by at most 1 µs
// here, the slack allows for that.)
func TestDeadlinePropagated(t *testing.T) {
	h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck}, step{code: codes.Unavailable}, step{})
	const budget = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	dl, _ := ctx.Deadline()
	start := time.Now()
	if err := h.check(ctx); err != nil {
		t.Fatal(err)
	}
	call := time.Since(start)
	for i, a := range h.b.seen() {
		if !a.hasDL {
			t.Fatalf("attempt %d: the server's context has no deadline", i+1)
		}
		if left := a.deadline.Sub(a.at); left > budget {
			t.Errorf("attempt %d: server's budget %v, more than the caller's %v", i+1, left, budget)
		}
		if late := a.deadline.Sub(dl); late > call+time.Millisecond || late < -500*time.Millisecond {
			t.Errorf("attempt %d: server's deadline %v from the caller's, want within [-500 ms, %v] (the call's duration)", i+1, late, call)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := clientgrpc.New(clientgrpc.Config{Retry: &retry.Policy{MaxAttempts: -1}})
	var ce *clientgrpc.ConfigError
	if !errors.Is(err, clientgrpc.ErrConfig) || !errors.As(err, &ce) || ce.Field != "Retry" {
		t.Fatalf("New with MaxAttempts -1: %v, want a ConfigError for Retry", err)
	}
	if _, err := clientgrpc.New(clientgrpc.Config{}); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
}

func TestDefaultRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{status.Error(codes.Unavailable, "x"), true},
		{status.Error(codes.ResourceExhausted, "x"), false}, // only with pushback, which it cannot see
		{status.Error(codes.DeadlineExceeded, "x"), false},
		{status.Error(codes.Internal, "x"), false},
		{status.Error(codes.Canceled, "x"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("plain"), false},
	} {
		if got := clientgrpc.DefaultRetryable(tc.err); got != tc.want {
			t.Errorf("DefaultRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestDefaultFailure(t *testing.T) {
	failures := map[codes.Code]bool{
		codes.Unavailable: true, codes.DeadlineExceeded: true, codes.Internal: true, codes.Unknown: true,
		codes.DataLoss: true, codes.ResourceExhausted: true,
	}
	for c := codes.OK; c <= codes.Unauthenticated+2; c++ {
		err := status.Error(c, "x") // nil for OK
		if got := clientgrpc.DefaultFailure(err); got != failures[c] {
			t.Errorf("DefaultFailure(%v) = %v, want %v", c, got, failures[c])
		}
	}
	if !clientgrpc.DefaultFailure(errors.New("not a status")) {
		t.Error("a non-status error (code Unknown) should be a failure")
	}
}

// No goroutine outlives the calls and streams: retry sleeps cut by the
// context, a bulkhead wait that times out, an abandoned stream.
func TestNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()

	func() {
		bh, _ := client.NewBulkhead(1, 20*time.Millisecond)
		h := serve(t, clientgrpc.Config{Retry: fastPolicy(t, 3, nil), Idempotent: isCheck, Bulkhead: bh},
			step{code: codes.Unavailable, pushback: "30000"})
		defer h.stop()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		if err := h.check(ctx); status.Code(err) != codes.Canceled { // the 30 s retry sleep is cut
			t.Errorf("call cancelled during its retry sleep: %v, want Canceled", err)
		}
		sctx, scancel := context.WithCancel(context.Background())
		st, err := h.client.Watch(sctx, &grpc_health_v1.HealthCheckRequest{Service: "hold"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
		_ = h.check(qctx) // waits 20 ms for the stream's place, then refused
		qcancel()
		scancel() // the stream is abandoned
		eventually(t, "abandoned stream's place released", func() bool { return bh.Limiter().InFlight() == 0 })
	}()

	leakcheck.Verify(t, wait, ignore)

}
