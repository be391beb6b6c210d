package balancergrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	_ "github.com/spillwayhq/spillway/balancer/balancergrpc" // registers spillway_least_request
)

// A channel to two loopback servers balanced by spillway_least_request:
// while a call is held on one server, every new call goes to the other,
// the one with fewer RPCs in flight. A manual resolver stands in for DNS
// or any other grpc resolver.
func Example() {
	release := make(chan struct{})
	held := make(chan string, 1)
	a, stopA := startServer("a", held, release)
	defer stopA()
	b, stopB := startServer("b", held, release)
	defer stopB()

	r := manual.NewBuilderWithScheme("example")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.addr}, {Addr: b.addr}}})
	conn, err := grpc.NewClient(r.Scheme()+":///orders",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"spillway_least_request":{}}]}`))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	hc := grpc_health_v1.NewHealthClient(conn)
	call := func(ctx context.Context) string {
		var md metadata.MD
		if _, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
			panic(err)
		}
		return md.Get("server")[0]
	}

	// Both connections connect in the background: call until both servers
	// have answered once.
	for a.calls.Load() == 0 || b.calls.Load() == 0 {
		call(context.Background())
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		call(metadata.AppendToOutgoingContext(context.Background(), "hold", "1"))
	}()
	busy := <-held
	other := 0
	for range 10 {
		if call(context.Background()) != busy {
			other++
		}
	}
	close(release)
	<-done
	fmt.Printf("while a call was held, %d of 10 calls went to the other server\n", other)
	// Output: while a call was held, 10 of 10 calls went to the other server
}

// healthServer answers the health service's Check with SERVING and the
// header "server: name"; a call with the metadata "hold" waits for release
// after sending the server's name to held.
type healthServer struct {
	grpc_health_v1.UnimplementedHealthServer
	addr, name string
	calls      atomic.Int64
	held       chan<- string
	release    <-chan struct{}
}

func (s *healthServer) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	s.calls.Add(1)
	grpc.SetHeader(ctx, metadata.Pairs("server", s.name))
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("hold")) > 0 {
		s.held <- s.name
		<-s.release
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

// startServer serves the health service on a loopback port; stop stops the
// server and waits for it to end.
func startServer(name string, held chan<- string, release <-chan struct{}) (s *healthServer, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s = &healthServer{addr: lis.Addr().String(), name: name, held: held, release: release}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, s)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	return s, func() { srv.Stop(); <-served }
}
