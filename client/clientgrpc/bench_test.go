package clientgrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/client/clientgrpc"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/throttle"
)

// okInvoker answers OK without a network: the benchmarks measure the
// interceptor, not gRPC.
func okInvoker(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
	return nil
}

// fullStack returns interceptors with every layer: throttle, retry with a
// budget (the method is retryable, so the trailer is captured), breaker
// and bulkhead.
func fullStack(tb testing.TB) *clientgrpc.Interceptors {
	tb.Helper()
	th, _ := throttle.New(throttle.Config{})
	budget, _ := retry.NewBudget(retry.BudgetConfig{})
	pol, _ := retry.NewPolicy(retry.Policy{Budget: budget})
	br, _ := breaker.New(breaker.Config{})
	bh, _ := client.NewBulkhead(100, 0)
	ic, err := clientgrpc.New(clientgrpc.Config{Throttle: th, Retry: pol, Breaker: br, Bulkhead: bh, RetryNonIdempotent: true})
	if err != nil {
		tb.Fatal(err)
	}
	return ic
}

// openBreaker returns interceptors whose breaker is open.
func openBreaker(tb testing.TB) *clientgrpc.Interceptors {
	tb.Helper()
	br, _ := breaker.New(breaker.Config{Threshold: 1, Recovery: 1e9})
	t, _ := br.Allow(0)
	t.Done(0, false)
	ic, err := clientgrpc.New(clientgrpc.Config{Breaker: br})
	if err != nil {
		tb.Fatal(err)
	}
	return ic
}

func benchUnary(b *testing.B, ctx context.Context, it grpc.UnaryClientInterceptor, want codes.Code) {
	b.ReportAllocs()
	for b.Loop() {
		if err := it(ctx, checkMethod, nil, nil, nil, okInvoker); status.Code(err) != want {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnary/bare is the fake invoker alone; /full adds throttle, retry
// with a budget, breaker and bulkhead on the success path; /full+class also
// forwards a class (gRPC's metadata copy); /breaker-open is a local
// refusal.
func BenchmarkUnary(b *testing.B) {
	bare := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	b.Run("bare", func(b *testing.B) { benchUnary(b, context.Background(), bare, codes.OK) })
	b.Run("full", func(b *testing.B) { benchUnary(b, context.Background(), fullStack(b).Unary(), codes.OK) })
	b.Run("full+class", func(b *testing.B) {
		benchUnary(b, shed.WithClass(context.Background(), shed.Sheddable), fullStack(b).Unary(), codes.OK)
	})
	b.Run("breaker-open", func(b *testing.B) {
		benchUnary(b, context.Background(), openBreaker(b).Unary(), codes.Unavailable)
	})
}

// The success path through every layer and a local refusal allocate
// nothing of their own. (Skipped under the race detector, whose sync.Pool
// drops items on purpose.)
func TestUnaryDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ctx := context.Background()
	for name, it := range map[string]grpc.UnaryClientInterceptor{
		"success":      fullStack(t).Unary(),
		"breaker open": openBreaker(t).Unary(),
	} {
		it(ctx, checkMethod, nil, nil, nil, okInvoker) // warm the pool
		if n := testing.AllocsPerRun(1000, func() { _ = it(ctx, checkMethod, nil, nil, nil, okInvoker) }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
