package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// rawCodec moves messages as they are (*[]byte both ways), so the echo
// service needs no generated code; it is chosen per call with
// grpc.CallContentSubtype("raw") (content-type application/grpc+raw).
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func init() { encoding.RegisterCodec(rawCodec{}) }

// notFoundMsg is the status message of test.Echo/Fail: spaces, a percent
// sign and non-ASCII letters, which grpc-message carries percent-encoded.
const notFoundMsg = "widget 42 not found: 100% gone, ünïcödé"

// echoDesc is a service registered by hand: Fail (unary) answers
// NotFound with a trailer; Echo (bidirectional) sends every message back,
// then the header x-echo: on and the trailer x-echo-count.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Fail",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-asked", string(in)))
			return nil, status.Error(codes.NotFound, notFoundMsg)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Echo", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			if err := ss.SendHeader(metadata.Pairs("x-echo", "on")); err != nil {
				return err
			}
			n := 0
			for {
				var m []byte
				err := ss.RecvMsg(&m)
				if errors.Is(err, io.EOF) {
					ss.SetTrailer(metadata.Pairs("x-echo-count", fmt.Sprint(n)))
					return nil
				}
				if err != nil {
					return err
				}
				n++
				if err := ss.SendMsg(&m); err != nil {
					return err
				}
			}
		},
	}},
}

// grpcBackend starts a grpc-go server with the health service (service
// "echo" SERVING) and test.Echo.
func grpcBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := grpchealth.NewServer()
	hs.SetServingStatus("echo", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	gs.RegisterService(&echoDesc, struct{}{})
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return ln.Addr().String()
}

// grpcGateway starts a gateway in front of a grpc backend: requests with
// x-route: stream take a streaming route and x-route: short a plain one,
// both with a 300 ms request timeout; the rest a route with the defaults.
// It returns a client connected with h2c prior knowledge.
func grpcGateway(t *testing.T) *grpc.ClientConn {
	t.Helper()
	be := grpcBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: grpc, address: "127.0.0.1:0"}]
routes:
  - name: stream
    match: {headers: [{name: x-route, value: stream}]}
    cluster: grpc
    streaming: true
    timeouts: {request: 300ms, idle: 30s}
  - name: short
    match: {headers: [{name: x-route, value: short}]}
    cluster: grpc
    timeouts: {request: 300ms}
  - {name: rest, cluster: grpc}
clusters: [{name: grpc, protocol: h2c, endpoints: ["`+be+`"]}]
`)
	cc, err := grpc.NewClient(g.Addr("grpc"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestGRPCUnary: health Check through the gateway answers SERVING for a
// known service and NotFound for an unknown one; a handler's NotFound
// with a percent-encoded message and a custom trailer arrives intact.
func TestGRPCUnary(t *testing.T) {
	noLeaks(t)
	cc := grpcGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "echo"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check(echo): %v %v, want SERVING", resp, err)
	}
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "missing"})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "unknown service" {
		t.Fatalf("Check(missing): %v, want NotFound \"unknown service\"", err)
	}
	var trailer metadata.MD
	in, out := []byte("widget-42"), []byte(nil)
	err = cc.Invoke(ctx, "/test.Echo/Fail", &in, &out, grpc.CallContentSubtype("raw"), grpc.Trailer(&trailer))
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != notFoundMsg {
		t.Fatalf("Fail: %v, want NotFound %q", err, notFoundMsg)
	}
	if got := trailer.Get("x-asked"); len(got) != 1 || got[0] != "widget-42" {
		t.Fatalf("Fail's trailer x-asked = %q, want [widget-42] (trailer %v)", got, trailer)
	}
}

// TestGRPCBidiStream sends 100 messages while receiving their echoes on
// one bidirectional stream, then reads the header, the OK status and the
// custom trailer.
func TestGRPCBidiStream(t *testing.T) {
	noLeaks(t)
	cc := grpcGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := cc.NewStream(ctx, &echoDesc.Streams[0], "/test.Echo/Echo", grpc.CallContentSubtype("raw"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			m := []byte(fmt.Sprintf("message %03d", i))
			if err := st.SendMsg(&m); err != nil {
				sent <- fmt.Errorf("send %d: %w", i, err)
				return
			}
		}
		sent <- st.CloseSend()
	}()
	for i := range n {
		var m []byte
		if err := st.RecvMsg(&m); err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if want := fmt.Sprintf("message %03d", i); string(m) != want {
			t.Fatalf("echo %d = %q, want %q", i, m, want)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	var m []byte
	if err := st.RecvMsg(&m); err != io.EOF {
		t.Fatalf("after %d echoes: %v, want io.EOF (status OK)", n, err)
	}
	if h, err := st.Header(); err != nil || len(h.Get("x-echo")) != 1 || h.Get("x-echo")[0] != "on" {
		t.Errorf("header x-echo = %q (%v), want [on]", h.Get("x-echo"), err)
	}
	if got := st.Trailer().Get("x-echo-count"); len(got) != 1 || got[0] != "100" {
		t.Errorf("trailer x-echo-count = %q, want [100]", got)
	}
}

// echoOnce sends one message on a stream and reads its echo.
func echoOnce(st grpc.ClientStream, msg string) error {
	m := []byte(msg)
	if err := st.SendMsg(&m); err != nil {
		return err
	}
	var got []byte
	if err := st.RecvMsg(&got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// TestGRPCStreamingRouteOutlivesRequestTimeout opens a stream on the
// streaming route and one on a plain route, both with request: 300ms.
// The plain one is cut by its timeout; the streaming one, opened first,
// still echoes after that and ends with status OK.
func TestGRPCStreamingRouteOutlivesRequestTimeout(t *testing.T) {
	noLeaks(t)
	cc := grpcGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(ctx context.Context, route string) grpc.ClientStream {
		t.Helper()
		rctx := metadata.AppendToOutgoingContext(ctx, "x-route", route)
		st, err := cc.NewStream(rctx, &echoDesc.Streams[0], "/test.Echo/Echo", grpc.CallContentSubtype("raw"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	began := time.Now()
	long := open(ctx, "stream")
	if err := echoOnce(long, "first"); err != nil {
		t.Fatalf("streaming route: %v", err)
	}
	// The plain stream's own 5s bound stands for "never cut".
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	short := open(sctx, "short")
	if err := echoOnce(short, "first"); err != nil {
		t.Fatalf("plain route: %v", err)
	}
	var m []byte
	err := short.RecvMsg(&m) // blocks until the route's request timeout cuts the stream
	if err == nil || err == io.EOF || status.Code(err) == codes.DeadlineExceeded {
		t.Fatalf("plain route past its request timeout: %v, want the stream cut by the gateway", err)
	}
	if since := time.Since(began); since < 300*time.Millisecond {
		t.Fatalf("plain route cut after %v, before its 300ms request timeout (%v)", since, err)
	}
	if err := echoOnce(long, "after the timeout"); err != nil {
		t.Fatalf("streaming route %v after it opened (request timeout 300ms): %v", time.Since(began), err)
	}
	if err := long.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := long.RecvMsg(&m); err != io.EOF {
		t.Fatalf("streaming route at its end: %v, want io.EOF (status OK)", err)
	}
	if got := long.Trailer().Get("x-echo-count"); len(got) != 1 || got[0] != "2" {
		t.Errorf("streaming route trailer x-echo-count = %q, want [2]", got)
	}
}
