package admitgrpc

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/shed"
)

// nopStream is a server transport stream that discards what is set on it,
// so the benchmarks measure the interceptors, not gRPC's metadata copies.
type nopStream struct{}

func (nopStream) Method() string               { return checkMethod }
func (nopStream) SetHeader(metadata.MD) error  { return nil }
func (nopStream) SendHeader(metadata.MD) error { return nil }
func (nopStream) SetTrailer(metadata.MD) error { return nil }

// benchServerStream is a grpc.ServerStream with only a context.
type benchServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *benchServerStream) Context() context.Context { return s.ctx }
func (s *benchServerStream) SetTrailer(metadata.MD)   {}

func benchCtx(md bool) context.Context {
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), nopStream{})
	if md {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(shed.ClassMetadataKey, "critical"))
	}
	return ctx
}

func okHandler(context.Context, any) (any, error) { return nil, nil }

// fullGate returns a Gate whose only place is taken.
func fullGate(b *testing.B) *admit.Gate {
	g := newGate(b, 1, single, admit.Config{})
	if _, ok := g.Limiter().Acquire(0, shed.Critical); !ok {
		b.Fatal("could not take the only place")
	}
	return g
}

func benchUnary(b *testing.B, g *admit.Gate, ctx context.Context) {
	it := UnaryServerInterceptor(g, Options{})
	b.ReportAllocs()
	for b.Loop() {
		_, _ = it(ctx, nil, checkInfo, okHandler)
	}
}

// BenchmarkUnaryAdmit: admitted at once, the handler returns nil.
func BenchmarkUnaryAdmit(b *testing.B) {
	benchUnary(b, newGate(b, 1<<20, single, admit.Config{}), benchCtx(false))
}

// BenchmarkUnaryAdmitClassMetadata: as above, the class read from metadata.
func BenchmarkUnaryAdmitClassMetadata(b *testing.B) {
	benchUnary(b, newGate(b, 1<<20, single, admit.Config{}), benchCtx(true))
}

// BenchmarkUnaryReject: refused at a full limit (Unavailable + pushback).
func BenchmarkUnaryReject(b *testing.B) { benchUnary(b, fullGate(b), benchCtx(false)) }

// BenchmarkUnaryRejectClassMetadata: refused, the class read from metadata.
func BenchmarkUnaryRejectClassMetadata(b *testing.B) { benchUnary(b, fullGate(b), benchCtx(true)) }

func benchStream(b *testing.B, g *admit.Gate) {
	it := StreamServerInterceptor(g, Options{})
	ss := &benchServerStream{ctx: benchCtx(false)}
	info := &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch", IsServerStream: true}
	h := func(any, grpc.ServerStream) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = it(nil, ss, info, h)
	}
}

// BenchmarkStreamAdmit: a stream admitted at once whose handler returns.
func BenchmarkStreamAdmit(b *testing.B) { benchStream(b, newGate(b, 1<<20, single, admit.Config{})) }

// BenchmarkStreamReject: a stream refused at a full limit.
func BenchmarkStreamReject(b *testing.B) { benchStream(b, fullGate(b)) }

// BenchmarkUnaryAdmitParallel: admission from all Ps at once.
func BenchmarkUnaryAdmitParallel(b *testing.B) {
	it := UnaryServerInterceptor(newGate(b, 1<<20, single, admit.Config{}), Options{})
	ctx := benchCtx(false)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = it(ctx, nil, checkInfo, okHandler)
		}
	})
}

func BenchmarkPeerClient(b *testing.B) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}})
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		sink += PeerClient(ctx)
	}
	_ = sink
}
