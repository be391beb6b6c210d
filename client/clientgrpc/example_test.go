package clientgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/client/clientgrpc"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/throttle"
)

// The client stack on a gRPC connection. The loopback server here answers
// UNAVAILABLE to its first call: the interceptors retry the method named
// idempotent after a short backoff, paid from the budget, and the caller
// sees the second attempt's answer. A call the bulkhead has no place
// for fails locally with RESOURCE_EXHAUSTED, without reaching the server.
func Example() {
	srv := startFlaky(1)
	defer srv.stop()

	budget, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 5})
	policy, _ := retry.NewPolicy(retry.Policy{MaxAttempts: 4, Backoff: retry.Backoff{Base: 0.01, Cap: 0.1}, Budget: budget})
	brk, _ := breaker.New(breaker.Config{Threshold: 5, Recovery: 1})
	thr, _ := throttle.New(throttle.Config{})
	bulk, _ := client.NewBulkhead(1, 0) // one call at a time, no wait
	ic, err := clientgrpc.New(clientgrpc.Config{Throttle: thr, Retry: policy, Breaker: brk, Bulkhead: bulk,
		Idempotent: func(method string) bool { return method == "/grpc.health.v1.Health/Check" }})
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(ic.Unary()), grpc.WithChainStreamInterceptor(ic.Stream()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	hc := grpc_health_v1.NewHealthClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	st := ic.Stats()
	fmt.Println(resp.GetStatus(), err)
	fmt.Printf("server calls %d; attempts sent %d, retries %d\n", srv.calls.Load(), st.Sent, st.Retried)

	// A watch stream holds the bulkhead's one place until it ends.
	wctx, stopWatch := context.WithCancel(ctx)
	if _, err := hc.Watch(wctx, &grpc_health_v1.HealthCheckRequest{}); err != nil {
		panic(err)
	}
	_, err = hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	var refused *clientgrpc.Error
	fmt.Println(status.Code(err), errors.As(err, &refused))
	stopWatch()
	// Output:
	// SERVING <nil>
	// server calls 2; attempts sent 2, retries 1
	// ResourceExhausted true
}

// flaky is a loopback health server whose first failures calls to Check
// answer UNAVAILABLE; Watch sends SERVING and waits for the caller to go.
type flaky struct {
	grpc_health_v1.UnimplementedHealthServer
	failures int64
	calls    atomic.Int64
	addr     string
	stop     func()
}

func (s *flaky) Check(context.Context, *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	if s.calls.Add(1) <= s.failures {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (s *flaky) Watch(_ *grpc_health_v1.HealthCheckRequest, w grpc.ServerStreamingServer[grpc_health_v1.HealthCheckResponse]) error {
	if err := w.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	<-w.Context().Done()
	return nil
}

func startFlaky(failures int64) *flaky {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := &flaky{failures: failures, addr: lis.Addr().String()}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, s)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	s.stop = func() { srv.Stop(); <-served }
	return s
}
