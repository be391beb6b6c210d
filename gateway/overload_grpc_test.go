package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// holdDesc is a unary service registered by hand (its server always has
// an interceptor): test.Hold/Wait tells arrived, then answers its request
// back once release is closed (or the call ends).
var holdDesc = grpc.ServiceDesc{
	ServiceName: "test.Hold",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Wait",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			h := srv.(*holder)
			wait := func(ctx context.Context, req any) (any, error) {
				h.arrived <- struct{}{}
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return req, nil
			}
			return icpt(ctx, &in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Hold/Wait"}, wait)
		},
	}},
}

// holder is test.Hold's state, and the calls that reached the server by
// method.
type holder struct {
	arrived chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func (h *holder) count(method string) int { h.mu.Lock(); defer h.mu.Unlock(); return h.calls[method] }

// countingGRPCBackend starts a grpc-go server with the health service
// (service "" SERVING) and test.Hold, counting every call that reaches it.
func countingGRPCBackend(t *testing.T) (string, *holder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{arrived: make(chan struct{}, 4), release: make(chan struct{}), calls: map[string]int{}}
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		h.mu.Lock()
		h.calls[info.FullMethod]++
		h.mu.Unlock()
		return next(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, grpchealth.NewServer())
	gs.RegisterService(&holdDesc, h)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return ln.Addr().String(), h
}

// grpcDial connects a grpc-go client to addr (h2c prior knowledge).
func grpcDial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// pushback checks a gRPC refusal: code want, the reason code, and a
// positive grpc-retry-pushback-ms (or none, when !withPushback).
func pushback(t *testing.T, what string, err error, tr metadata.MD, want codes.Code, reason string, withPushback bool) {
	t.Helper()
	if status.Code(err) != want {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	if got := tr.Get("spillway-reason"); len(got) != 1 || got[0] != reason {
		t.Fatalf("%s: spillway-reason %q, want %q (trailer %v)", what, got, reason, tr)
	}
	p := tr.Get("grpc-retry-pushback-ms")
	if !withPushback {
		if len(p) != 0 {
			t.Fatalf("%s: grpc-retry-pushback-ms %q, want none", what, p)
		}
		return
	}
	if len(p) != 1 {
		t.Fatalf("%s: grpc-retry-pushback-ms %q, want one value (trailer %v)", what, p, tr)
	}
	if ms, err := strconv.ParseInt(p[0], 10, 64); err != nil || ms <= 0 {
		t.Fatalf("%s: grpc-retry-pushback-ms %q, want a positive number of milliseconds", what, p[0])
	}
}

const healthCheck = "/grpc.health.v1.Health/Check"

// TestGRPCRouteRefused: on grpc routes the chain's refusals reach a real
// grpc-go client as gRPC statuses, trailers-only, and the backend never
// sees the refused calls: a spent budget from a trusted peer
// (Spillway-Timeout metadata, or a raw grpc-timeout of 0) is
// DEADLINE_EXCEEDED without pushback and costs no rate-limit token; the
// same from an untrusted peer is ignored; past a rule's burst the call is
// RESOURCE_EXHAUSTED, and past a cluster's admission limit UNAVAILABLE,
// both with grpc-retry-pushback-ms.
func TestGRPCRouteRefused(t *testing.T) {
	noLeaks(t)
	be, h := countingGRPCBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: edge, address: "127.0.0.1:0"}
  - {name: inner, address: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
routes:
  - name: limited
    match: {prefix: /grpc.health.v1.Health/}
    cluster: grpc
    grpc: true
    policies:
      ratelimit: {rules: [{id: per-ip, key: [ip], rate: 1, per: 1m, burst: 1}]}
  - {name: held, match: {prefix: /test.Hold/}, cluster: held, grpc: true, policies: {class: critical}}
clusters:
  - {name: grpc, protocol: h2c, endpoints: ["`+be+`"]}
  - name: held
    protocol: h2c
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 1}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	edge, inner := grpcDial(t, g.Addr("edge")), grpcDial(t, g.Addr("inner"))
	spent := metadata.AppendToOutgoingContext(ctx, "spillway-timeout", "0n")
	var tr metadata.MD
	_, err := healthpb.NewHealthClient(inner).Check(spent, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
	pushback(t, "spent budget from a trusted peer", err, tr, codes.DeadlineExceeded, "deadline", false)
	rawGRPCTimeout(t, g.Addr("inner"), "0n")

	resp, err := healthpb.NewHealthClient(edge).Check(spent, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("untrusted spent budget, within the burst: %v %v, want SERVING", resp, err)
	}
	tr = nil
	_, err = healthpb.NewHealthClient(edge).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
	pushback(t, "past the burst", err, tr, codes.ResourceExhausted, "ratelimit:per-ip", true)
	if n := h.count(healthCheck); n != 1 {
		t.Fatalf("the backend saw %d health checks, want the 1 admitted", n)
	}

	held := make(chan error, 1)
	go func() {
		in, out := []byte("first"), []byte(nil)
		held <- edge.Invoke(ctx, "/test.Hold/Wait", &in, &out, grpc.CallContentSubtype("raw"))
	}()
	select {
	case <-h.arrived:
	case <-ctx.Done():
		t.Fatal("the first held call never reached the backend")
	}
	tr = nil
	in, out := []byte("second"), []byte(nil)
	err = edge.Invoke(ctx, "/test.Hold/Wait", &in, &out, grpc.CallContentSubtype("raw"), grpc.Trailer(&tr))
	pushback(t, "past the admission limit", err, tr, codes.Unavailable, "admit:limit", true)
	close(h.release)
	if err := <-held; err != nil {
		t.Fatalf("held call: %v", err)
	}
	if n := h.count("/test.Hold/Wait"); n != 1 {
		t.Fatalf("the backend saw %d held calls, want the 1 admitted", n)
	}
}

// rawGRPCTimeout sends a gRPC health check with grpc-timeout v over raw
// h2c (grpc-go never sends a spent timeout: it fails the call itself) and
// expects a trailers-only DEADLINE_EXCEEDED.
func rawGRPCTimeout(t *testing.T, addr, v string) {
	t.Helper()
	c := &http.Client{Transport: h2cTransport(t, func() string { return addr }), Timeout: 10 * time.Second}
	req, err := http.NewRequest("POST", "http://"+addr+healthCheck, strings.NewReader("\x00\x00\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}, "Grpc-Timeout": {v}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != strconv.Itoa(int(codes.DeadlineExceeded)) ||
		resp.Header.Get("Spillway-Reason") != "deadline" || len(body) != 0 {
		t.Fatalf("grpc-timeout %s from a trusted peer: %d %v %q, want a trailers-only DEADLINE_EXCEEDED", v, resp.StatusCode, resp.Header, body)
	}
}
