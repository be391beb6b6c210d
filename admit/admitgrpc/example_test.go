package admitgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/admit/admitgrpc"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// classEcho answers Check with SERVING and prints the class the call was
// admitted with.
type classEcho struct {
	grpc_health_v1.UnimplementedHealthServer
}

func (classEcho) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	c, _ := shed.ClassFrom(ctx)
	fmt.Println("handler: class", c)
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

// A gRPC server behind an adaptive concurrency limit: calls carry their
// class in metadata, each client (peer host) gets its fair share.
func Example() {
	alg, err := limit.NewGradient2(limit.Gradient2Config{})
	if err != nil {
		panic(err)
	}
	l, err := limit.NewLimiter(alg, limit.LimiterConfig{
		Queue:    limit.QueueConfig{Discipline: limit.AdaptiveLIFO, MaxWait: 0.5},
		Fairness: limit.FairnessConfig{Slots: 1024},
	})
	if err != nil {
		panic(err)
	}
	g, err := admit.New(admit.Config{Name: "health", Limiter: l})
	if err != nil {
		panic(err)
	}
	opts := admitgrpc.Options{Client: admitgrpc.PeerClient}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(admitgrpc.UnaryServerInterceptor(g, opts)),
		grpc.ChainStreamInterceptor(admitgrpc.StreamServerInterceptor(g, opts)),
	)
	grpc_health_v1.RegisterHealthServer(srv, classEcho{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), shed.ClassMetadataKey, "critical")
	resp, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	fmt.Println("client:", resp.GetStatus(), err)
	// Output:
	// handler: class critical
	// client: SERVING <nil>
}

// Outcomes fed to the Limiter for the ways a handler can end.
func ExampleDefaultOutcome() {
	for _, err := range []error{
		nil,
		status.Error(codes.NotFound, "no such user"),
		status.Error(codes.Unavailable, "database overloaded"),
		context.Canceled,
		errors.New("bug"),
	} {
		fmt.Println(admitgrpc.DefaultOutcome(err))
	}
	// Output:
	// success
	// success
	// dropped
	// ignore
	// success
}
